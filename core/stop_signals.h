// SIGINT (Ctrl-C), SIGTERM (kill, a job scheduler's stop) and SIGXFSZ (a write past `ulimit -f`)
// end a kvsim program at once, leaving no "<name>.tmp.<pid>" behind: the handler removes every
// temporary an unfinished output file holds (remove_open_temporaries, core/atomic_file.h, and the
// folders those files made, when empty), runs the program's own removal (kvsim-validate's
// scratch folders), then exits 130 for SIGINT, 143 for SIGTERM and 153 for SIGXFSZ, the shell's
// 128 + signal. Finished files stay: a sweep or capacity search re-run into the same folder
// resumes. A signal the parent set to be ignored (a background job's SIGINT) stays ignored.
// SIGXFSZ's default action would end the process with no cleanup (and a core dump).
#pragma once

namespace kvsim {

// What a program removes besides the temporaries; called from the signal handler, so it must be
// async-signal-safe.
using StopCleanup = void (*)() noexcept;

// Installs the handler for the process. `program` names it in the one line the handler prints
// ("kvsim: interrupted (SIGINT); unfinished files removed"); it must outlive the process (a
// string literal). `cleanup` may be null.
void install_stop_signals(const char* program, StopCleanup cleanup = nullptr);

}  // namespace kvsim
