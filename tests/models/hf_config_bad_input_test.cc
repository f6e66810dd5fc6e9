// config.json files built to break the reader (tests/data/bad/hf-config: each FILE with its
// FILE.expected message), and model paths that name something other than a file. Every one must
// be a one-line InputError naming the file and the place, short whatever the input's size.
#include <sys/stat.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/errors.h"
#include "models/catalog.h"
#include "models/hf_config.h"

using namespace kvsim;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// The message `load_model(name)` fails with ("" when it does not fail).
std::string load_error(const std::string& name) {
  try {
    (void)load_model(name, Catalog::builtin());
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

fs::path fresh_dir(const std::string& stem) {
  const fs::path d = fs::temp_directory_path() / (stem + "." + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

}  // namespace

TEST_CASE("every bad config.json gives its one-line error", "[models][hf][bad-input]") {
  const fs::path dir = fs::path(KVSIM_TEST_DATA) / "bad" / "hf-config";
  int checked = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".json") continue;
    INFO("file " << e.path().filename());
    const std::string expected = first_line(read_text(e.path().string() + ".expected"));
    REQUIRE(!expected.empty());
    std::string msg;
    try {
      (void)read_hf_config(e.path());
      FAIL("no error");
    } catch (const InputError& err) {
      msg = err.what();
    }
    // The message names the file by its path; the expected text starts at the file's name.
    CHECK_THAT(msg, Contains(expected));
    CHECK(msg.find('\n') == std::string::npos);
    // Short, but room for the list of supported architectures (17 names, about 330 characters).
    CHECK(msg.size() < 600 + e.path().string().size());
    ++checked;
  }
  CHECK(checked >= 7);
}

TEST_CASE("a config.json value is described, never dumped", "[models][hf][bad-input]") {
  // 100,000 nested lists under a key kvsim reads: dumping it in "got ..." overflowed the stack
  // (exit 139); 50,000 gave a 100 KB message. The message says what was found, in a few words.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  for (const std::string key : {"hidden_size", "tie_word_embeddings", "torch_dtype"}) {
    INFO(key);
    const std::string text =
        "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 4096, "
        "\"num_attention_heads\": 32, \"num_hidden_layers\": 32, "
        "\"intermediate_size\": 14336, \"vocab_size\": 128256, "
        "\"max_position_embeddings\": 8192, \"" +
        key + "x\": 1, \"" + key + "\": " + deep + "}";
    std::string msg;
    try {
      (void)parse_hf_config(text, "deep.json");
    } catch (const InputError& e) {
      msg = e.what();
    }
    CHECK_THAT(msg, Contains("got a list of 1 element(s)"));
    CHECK(msg.size() < 200);
  }
  // An object likewise; its key starts at column 41.
  CHECK_THROWS_WITH(parse_hf_config("{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": "
                                    "{\"a\": 1, \"b\": 2}}",
                                    "o.json"),
                    Contains("o.json:1:41: 'hidden_size': expected an integer in [1, 1048576], got "
                             "an object of 2 key(s)"));
}

TEST_CASE("every JSON error is kvsim's one-line error with the place", "[models][hf][bad-input]") {
  // A number too large for a double was nlohmann's out_of_range exception, with no file or
  // place, which nothing caught. The place is the token's last character: line 2, column 20 (the
  // key is columns 1-13, the colon 14, the number 16-20).
  CHECK_THROWS_AS(
      parse_hf_config("{\"architectures\": [\"LlamaForCausalLM\"],\n\"hidden_size\": 1e400}",
                      "big.json"),
      InputError);
  CHECK_THROWS_WITH(
      parse_hf_config("{\"architectures\": [\"LlamaForCausalLM\"],\n\"hidden_size\": 1e400}",
                      "big.json"),
      Contains("big.json:2:20: malformed JSON: number overflow parsing '1e400'"));
  // The same far below: -1e400 (columns 7-12).
  CHECK_THROWS_WITH(parse_hf_config("{\"x\": -1e400}", "neg.json"),
                    Contains("neg.json:1:12: malformed JSON: number overflow parsing '-1e400'"));
  // A long token echoed by the parser ("last read: '...'") is cut: a 100,000-character string
  // left open.
  std::string msg;
  try {
    (void)parse_hf_config("{\"a\": \"" + std::string(100000, 'x'), "open.json");
  } catch (const InputError& e) {
    msg = e.what();
  }
  CHECK_THAT(msg, Contains("open.json:1:"));
  CHECK_THAT(msg, Contains(": malformed JSON: syntax error while parsing value - invalid string: "
                           "missing closing quote; last read: '\\\"" +
                           std::string(39, 'x') + "...'"));
  CHECK(msg.size() < 300);
  // Empty input.
  CHECK_THROWS_WITH(parse_hf_config("", "empty.json"), Contains("empty.json:1:1: malformed JSON"));
}

TEST_CASE("a model path that is not a file says what it is", "[models][hf][bad-input]") {
  const fs::path dir = fresh_dir("kvsim-model-path");
  // A folder with a config.json in it (a downloaded model): name the file inside.
  fs::create_directories(dir / "llama.json");
  CHECK_THAT(load_error((dir / "llama.json").string()),
             Contains("llama.json: is a folder, not a Hugging Face config.json"));
  fs::create_directories(dir / "Llama-3-8B");
  std::ofstream(dir / "Llama-3-8B" / "config.json") << "{}";
  CHECK_THAT(load_error((dir / "Llama-3-8B").string()),
             Contains("Llama-3-8B: is a folder; name the config.json inside it"));
  // A symbolic link loop, a FIFO and a device: each named, none read (a FIFO would block).
  fs::create_symlink(dir / "b.json", dir / "a.json");
  fs::create_symlink(dir / "a.json", dir / "b.json");
  CHECK_THAT(load_error((dir / "a.json").string()),
             Contains("a.json: is a symbolic link loop, not a Hugging Face config.json"));
  REQUIRE(::mkfifo((dir / "pipe.json").c_str(), 0600) == 0);
  CHECK_THAT(load_error((dir / "pipe.json").string()),
             Contains("pipe.json: is a FIFO (named pipe), not a Hugging Face config.json"));
  CHECK_THAT(load_error("/dev/zero"), Contains("/dev/zero: is a device, not a catalog name"));
  fs::create_symlink("/dev/zero", dir / "zero.json");
  CHECK_THAT(load_error((dir / "zero.json").string()), Contains("zero.json: is a device"));
  CHECK_THAT(load_error((dir / "missing.yaml").string()),
             Contains("missing.yaml: no such model file (a kvsim model spec (YAML))"));
  // A name not in the catalog and not on disk is still an unknown model, its name cut.
  CHECK_THAT(load_error("llama-3-9b"), Contains("unknown model 'llama-3-9b'"));
  const std::string long_name = load_error(std::string(1'000'000, 'q'));
  CHECK_THAT(long_name, Contains("unknown model '" + std::string(40, 'q') + "...'"));
  CHECK(long_name.size() < 2000);
  fs::remove_all(dir);
}
