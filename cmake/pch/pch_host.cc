// The translation unit that the shared precompiled headers are built for (CMakeLists.txt,
// KVSIM_PCH); it has no code of its own.
