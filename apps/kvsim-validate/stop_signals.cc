#include "apps/kvsim-validate/stop_signals.h"

#include <signal.h>
#include <unistd.h>

#include <cstring>

#include "core/atomic_file.h"
#include "validate/scratch_folder.h"

namespace kvsim::validate_cli {

namespace {

void write_stderr(const char* text) {
  const ssize_t ignored = ::write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

// Async-signal-safe only (both removals are); _exit skips destructors, which would race the
// interrupted code.
void on_stop_signal(int sig) {
  remove_open_temporaries();
  validate::remove_scratch_folders();
  write_stderr(sig == SIGINT ? "\nkvsim-validate: interrupted (SIGINT); unfinished files removed\n"
                             : "kvsim-validate: terminated (SIGTERM); unfinished files removed\n");
  ::_exit(128 + sig);
}

}  // namespace

void install_stop_signals() {
  for (int sig : {SIGINT, SIGTERM}) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    ::sigemptyset(&sa.sa_mask);
    ::sigaddset(&sa.sa_mask, SIGINT);
    ::sigaddset(&sa.sa_mask, SIGTERM);
    ::sigaction(sig, &sa, nullptr);
  }
}

}  // namespace kvsim::validate_cli
