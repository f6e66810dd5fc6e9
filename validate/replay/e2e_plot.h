// The e2e figure: `python3 scripts/kvsim_plot DIR -o DIR` (scripts/kvsim_plot/e2e.py) draws
// DIR/e2e.png and its caption DIR/e2e.txt from the e2e folder. validate/ cannot use apps/kvsim's
// run_data_script (layers point down), so this is its own small fork/exec.
#pragma once

#include <filesystem>

namespace kvsim::validate {

// Throws InputError when python3 cannot run or the script fails (it has printed why).
void render_e2e_figure(const std::filesystem::path& dir);

}  // namespace kvsim::validate
