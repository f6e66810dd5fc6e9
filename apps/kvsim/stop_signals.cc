#include "apps/kvsim/stop_signals.h"

#include <signal.h>
#include <unistd.h>

#include <cstring>

#include "core/atomic_file.h"

namespace kvsim::cli {

namespace {

void write_stderr(const char* text) {
  const ssize_t ignored = ::write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

// Async-signal-safe only: unlink/rmdir (remove_open_temporaries), write and _exit. _exit skips
// destructors and atexit handlers, which are not safe here and would race the other threads.
// SIGXFSZ is a write past the file size limit (`ulimit -f`): its default action ends the process
// without any cleanup, so it is handled like SIGTERM.
void on_stop_signal(int sig) {
  remove_open_temporaries();
  write_stderr(sig == SIGINT    ? "\nkvsim: interrupted (SIGINT); unfinished files removed\n"
               : sig == SIGXFSZ ? "kvsim: file size limit exceeded (SIGXFSZ); unfinished files "
                                  "removed\n"
                                : "kvsim: terminated (SIGTERM); unfinished files removed\n");
  ::_exit(128 + sig);
}

}  // namespace

void install_stop_signals() {
  for (int sig : {SIGINT, SIGTERM, SIGXFSZ}) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    ::sigemptyset(&sa.sa_mask);
    // A second signal while the first is handled waits (the handler ends in _exit anyway).
    ::sigaddset(&sa.sa_mask, SIGINT);
    ::sigaddset(&sa.sa_mask, SIGTERM);
    ::sigaddset(&sa.sa_mask, SIGXFSZ);
    ::sigaction(sig, &sa, nullptr);
  }
}

}  // namespace kvsim::cli
