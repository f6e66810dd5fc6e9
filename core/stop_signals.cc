#include "core/stop_signals.h"

#include <signal.h>
#include <unistd.h>

#include <cstring>

#include "core/atomic_file.h"

namespace kvsim {

namespace {

// Set once by install_stop_signals, before any signal can reach the handler.
const char* g_program = "kvsim";
StopCleanup g_cleanup = nullptr;

void write_stderr(const char* text) {
  const ssize_t ignored = ::write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

const char* stop_reason(int sig) {
  switch (sig) {
    case SIGINT: return ": interrupted (SIGINT); unfinished files removed\n";
    case SIGXFSZ: return ": file size limit exceeded (SIGXFSZ); unfinished files removed\n";
    default: return ": terminated (SIGTERM); unfinished files removed\n";
  }
}

// Async-signal-safe only: unlink/rmdir (remove_open_temporaries), the program's own removal,
// write and _exit. _exit skips destructors and atexit handlers, which are not safe here and would
// race the other threads.
void on_stop_signal(int sig) {
  remove_open_temporaries();
  if (g_cleanup != nullptr) g_cleanup();
  if (sig == SIGINT) write_stderr("\n");  // after the terminal's "^C"
  write_stderr(g_program);
  write_stderr(stop_reason(sig));
  ::_exit(128 + sig);
}

}  // namespace

void install_stop_signals(const char* program, StopCleanup cleanup) {
  g_program = program;
  g_cleanup = cleanup;
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

}  // namespace kvsim
