// SIGINT and SIGTERM end kvsim-validate at once, leaving nothing half-written: the handler
// removes every unfinished output file's temporary (core/atomic_file.h) and every scratch folder
// (validate/scratch_folder.h), then exits 130 for SIGINT and 143 for SIGTERM, as kvsim does
// (apps/kvsim/stop_signals.h). A signal the parent set to be ignored stays ignored.
#pragma once

namespace kvsim::validate_cli {

void install_stop_signals();

}  // namespace kvsim::validate_cli
