// SIGINT (Ctrl-C), SIGTERM (kill, a job scheduler's stop) and SIGXFSZ (a write past `ulimit -f`)
// end kvsim at once, leaving no "<name>.tmp.<pid>" behind: the handler removes every temporary an
// unfinished output file holds (and the folders those files made, when empty), then exits 130 for
// SIGINT, 143 for SIGTERM and 153 for SIGXFSZ, the shell's 128 + signal. Finished files stay: a sweep or capacity search re-run into the same
// folder resumes. A signal the parent set to be ignored (a background job's SIGINT) stays ignored.
#pragma once

namespace kvsim::cli {

void install_stop_signals();

}  // namespace kvsim::cli
