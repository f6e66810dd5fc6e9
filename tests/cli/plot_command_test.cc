// `kvsim plot` and `kvsim report` end to end: every figure kind rendered from a real run (of
// tests/data/plot/tiny-run.yaml) and from hand-made sweep and kvsim-validate folders, checked to be
// a valid image of the expected size that is not blank, byte-identical on a second render, and
// captioned with the data's scenario hash. Needs Debian's python3-matplotlib (CI installs it via
// scripts/setup.sh); without it these tests show as Skipped in ctest (tests/test_skip.h).
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli/figure_checks.h"
#include "tests/cli/run_cli.h"
#include "tests/sanitizer.h"

namespace fs = std::filesystem;
using kvsim::test::make_temp_dir;
using kvsim::test::not_blank;
using kvsim::test::png_size;
using kvsim::test::read_text;
using kvsim::test::run_cli;

namespace {

const std::string kData = std::string(KVSIM_TEST_DATA) + "/plot";

std::string render(const std::string& dir, const std::string& out, const std::string& extra = "") {
  const auto r = run_cli("plot '" + dir + "' -o '" + out + "'" + extra);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return r.out;
}

// Renders `dir` twice and checks every expected figure in both renders.
void check_figures(const std::string& dir, const std::vector<std::string>& names,
                   const std::string& hash) {
  const std::string tmp = make_temp_dir("kvsim-plot");
  render(dir, tmp + "/a");
  render(dir, tmp + "/b");
  for (const std::string& n : names) {
    INFO(n);
    const std::string a = read_text(tmp + "/a/" + n + ".png");
    const kvsim::test::PngSize s = png_size(a);
    CHECK(s.width == 700);  // one column: 3.5 in at 200 dpi
    CHECK(s.height >= 300);
    CHECK(not_blank(tmp + "/a/" + n + ".png"));
    CHECK(a == read_text(tmp + "/b/" + n + ".png"));
    const std::string caption = read_text(tmp + "/a/" + n + ".txt");
    CHECK(caption.find("scenario_hash: " + hash) != std::string::npos);
  }
  fs::remove_all(tmp);
}

// A real run folder of the tiny scenario, made once per test binary.
const std::string& tiny_run() {
  static const std::string dir = [] {
    const std::string d = make_temp_dir("kvsim-plot-run") + "/run";
    const auto r = run_cli("run '" + kData + "/tiny-run.yaml' -o '" + d + "'");
    REQUIRE(r.exit_code == 0);
    return d;
  }();
  return dir;
}

std::string manifest_hash(const std::string& run_dir) {
  const std::string m = read_text(run_dir + "/manifest.json");
  const std::string key = "\"scenario_hash\": \"";
  const size_t at = m.find(key);
  REQUIRE(at != std::string::npos);
  return m.substr(at + key.size(), 16);
}

// Standard base64 (RFC 4648, padded); empty when `in` holds anything else.
std::string base64_decode(const std::string& in) {
  static const std::string kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  if (in.empty() || in.size() % 4 != 0) return {};
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '=') {
      if (i + 2 < in.size()) return {};  // padding only at the end
      break;
    }
    const size_t v = kAlphabet.find(in[i]);
    if (v == std::string::npos) return {};
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return out;
}

// Loads `url` in headless Chromium (a fresh profile, nothing fetched in the background, console
// messages logged to stderr) and returns {exit status, DOM after load, stderr}.
struct ChromiumRun {
  int status = -1;
  std::string dom, log;
};
ChromiumRun chromium_dump(const std::string& url, const std::string& tmp) {
  const std::string profile = make_temp_dir("kvsim-chromium-profile");
  const std::string cmd =
      "timeout 90 /usr/bin/chromium --headless --no-sandbox --disable-gpu --disable-quic "
      "--no-first-run --disable-background-networking --disable-component-update --disable-sync "
      "--user-data-dir='" +
      profile + "' --enable-logging=stderr --v=0 --dump-dom '" + url + "' >'" + tmp +
      "/dom.html' 2>'" + tmp + "/chromium.log'";
  ChromiumRun r;
  r.status = std::system(cmd.c_str());
  r.dom = read_text(tmp + "/dom.html");
  r.log = read_text(tmp + "/chromium.log");
  fs::remove_all(profile);
  return r;
}

// The lines of Chromium's log that carry the page's console messages ("...:CONSOLE(7)] ..." or
// "...:CONSOLE:7] ..."); the rest is the browser's own noise (D-Bus, GPU probing).
std::string console_lines(const std::string& log) {
  std::string out;
  size_t at = 0;
  while (at < log.size()) {
    size_t end = log.find('\n', at);
    if (end == std::string::npos) end = log.size();
    const std::string line = log.substr(at, end - at);
    if (line.find(":CONSOLE") != std::string::npos) out += line + "\n";
    at = end + 1;
  }
  return out;
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("plot rejects a folder that holds no kvsim results with one line and exit 2") {
  const std::string tmp = make_temp_dir("kvsim-plot-empty");
  const auto r = run_cli("plot '" + tmp + "'");
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("not a kvsim run") != std::string::npos);
  CHECK(run_cli("plot '" + tmp + "/missing'").exit_code == 2);
  CHECK(run_cli("plot '" + tmp + "' --format gif").exit_code == 2);
  fs::remove_all(tmp);
}

TEST_CASE("plot renders a run's memory, outcome and latency figures, identically twice") {
  REQUIRE_MATPLOTLIB();
  check_figures(tiny_run(), {"memory", "outcomes", "latency_cdf", "batch", "breakdown"},
                manifest_hash(tiny_run()));
}

TEST_CASE("plot renders a two-key sweep as heatmaps and a one-key sweep as lines") {
  KVSIM_SKIP_UNDER_SANITIZER(kvsim::test::kFigureTimeIsPythons);
  REQUIRE_MATPLOTLIB();
  const std::vector<std::string> figs = {"sweep_availability", "sweep_oom_events",
                                         "sweep_e2e_p99_s", "sweep_tokens_dropped"};
  check_figures(kData + "/sweep", figs, "points 00000000000000a0");
  check_figures(kData + "/sweep1", figs, "none");
}

TEST_CASE("plot adds a TTFT p99 figure, and SLO attainment only when summary.csv has it") {
  KVSIM_SKIP_UNDER_SANITIZER(kvsim::test::kFigureTimeIsPythons);
  REQUIRE_MATPLOTLIB();
  const std::string tmp = make_temp_dir("kvsim-plot-slo");
  render(kData + "/sweep", tmp + "/grid");
  CHECK(fs::exists(tmp + "/grid/sweep_ttft_p99_s.png"));
  CHECK_FALSE(fs::exists(tmp + "/grid/sweep_slo_attainment.png"));  // no such column there
  render(kData + "/sweep_zip", tmp + "/zip");
  CHECK(fs::exists(tmp + "/zip/sweep_slo_attainment.png"));
  fs::remove_all(tmp);
}

// A zip: sweep's keys advance together: one axis, so a line figure (550 px high: one panel and
// the legend row), not a heat map of a mostly empty key-by-key grid (one panel per policy).
TEST_CASE("plot draws a zip: sweep as one axis: lines over the value tuples, not heat maps") {
  KVSIM_SKIP_UNDER_SANITIZER(kvsim::test::kFigureTimeIsPythons);
  REQUIRE_MATPLOTLIB();
  const std::vector<std::string> figs = {"sweep_availability", "sweep_oom_events",
                                         "sweep_e2e_p99_s",    "sweep_tokens_dropped",
                                         "sweep_ttft_p99_s",   "sweep_slo_attainment"};
  check_figures(kData + "/sweep_zip", figs, "points 00000000000000c1");
  const std::string tmp = make_temp_dir("kvsim-plot-zip");
  render(kData + "/sweep_zip", tmp);
  for (const std::string& n : figs) {
    INFO(n);
    CHECK(png_size(read_text(tmp + "/" + n + ".png")).height == 550);
    const std::string caption = read_text(tmp + "/" + n + ".txt");
    CHECK(caption.find("against the zipped keys (workload.rate, seed, advancing together), one "
                       "line per policy.") != std::string::npos);
    CHECK(caption.find("one panel per policy") == std::string::npos);
  }
  // The same two keys as a grid are two axes: heat maps, a panel per policy.
  render(kData + "/sweep", tmp + "/grid");
  CHECK(png_size(read_text(tmp + "/grid/sweep_availability.png")).height > 600);  // 2 panels
  CHECK(read_text(tmp + "/grid/sweep_availability.txt").find("one panel per policy") !=
        std::string::npos);
  fs::remove_all(tmp);
}

TEST_CASE("plot gives a constant heat-map panel a finite colour scale around its value") {
  KVSIM_SKIP_UNDER_SANITIZER(kvsim::test::kFigureTimeIsPythons);
  REQUIRE_MATPLOTLIB();
  const std::string tmp = make_temp_dir("kvsim-plot-const");
  const auto r = run_cli("plot '" + kData + "/sweep_const' -o '" + tmp + "'");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());  // no matplotlib warning
  // kv-guard's values are the same at every point; no-guard's vary and keep the usual scale.
  const std::vector<std::pair<std::string, std::string>> want = {
      {"sweep_availability", "kv-guard is 100 at every point (colour scale 90 to 110)."},
      {"sweep_oom_events", "kv-guard is 0 at every point (colour scale -1 to 1)."},
      {"sweep_ttft_p99_s", "kv-guard is 1.5 at every point (colour scale 1.35 to 1.65)."},
      {"sweep_slo_attainment", "kv-guard is 100 at every point (colour scale 90 to 110)."}};
  for (const auto& [name, text] : want) {
    INFO(name);
    const std::string caption = read_text(tmp + "/" + name + ".txt");
    CHECK(caption.find(text) != std::string::npos);
    CHECK(caption.find("no-guard is") == std::string::npos);
    CHECK(not_blank(tmp + "/" + name + ".png"));
  }
  fs::remove_all(tmp);
}

TEST_CASE("plot renders a calibration folder: predicted against measured, and a roofline") {
  KVSIM_SKIP_UNDER_SANITIZER(kvsim::test::kFigureTimeIsPythons);
  REQUIRE_MATPLOTLIB();
  check_figures(kData + "/validate", {"calibration", "roofline"}, "none");
}

TEST_CASE("plot's SVG and PDF output is byte-identical across renders") {
  KVSIM_SKIP_UNDER_SANITIZER(kvsim::test::kFigureTimeIsPythons);
  REQUIRE_MATPLOTLIB();
  const std::string tmp = make_temp_dir("kvsim-plot-fmt");
  for (const std::string fmt : {"svg", "pdf"}) {
    INFO(fmt);
    render(kData + "/validate", tmp + "/a", " --format " + fmt);
    render(kData + "/validate", tmp + "/b", " --format " + fmt);
    const std::string a = read_text(tmp + "/a/roofline." + fmt);
    CHECK(a.size() > 1000);
    CHECK(a == read_text(tmp + "/b/roofline." + fmt));
  }
  fs::remove_all(tmp);
}

TEST_CASE("report writes one self-contained HTML page with every figure, identically twice") {
  KVSIM_SKIP_UNDER_SANITIZER(kvsim::test::kFigureTimeIsPythons);
  REQUIRE_MATPLOTLIB();
  const std::string tmp = make_temp_dir("kvsim-report");
  for (const std::string name : {"a.html", "b.html"}) {
    const auto r = run_cli("report '" + tiny_run() + "' -o '" + tmp + "/" + name + "'");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
  }
  const std::string html = read_text(tmp + "/a.html");
  CHECK(html == read_text(tmp + "/b.html"));
  CHECK(count(html, "src=\"data:image/png;base64,") ==
        5);  // memory, outcomes, latency_cdf, batch, breakdown
  CHECK(html.find("http://") == std::string::npos);  // nothing fetched: readable offline
  CHECK(html.find("https://") == std::string::npos);
  CHECK(count(html, "<script") == 1);  // the table sorter, inline; nothing else runs
  CHECK(html.find("name: plot-tiny") != std::string::npos);  // the resolved scenario
  CHECK(html.find("rendered by kvsim 0.") != std::string::npos);
  CHECK(html.find(manifest_hash(tiny_run())) != std::string::npos);
  CHECK(html.find("<td>no-guard</td>") != std::string::npos);  // the summary table
  // summary.json's KV pool occupancy and SLO figures, per policy (tiny-run.yaml's `slo:`).
  CHECK(html.find("<h2>KV pool and SLO</h2>") != std::string::npos);
  CHECK(html.find("<td>ttft_s &lt;= 30, tpot_s &lt;= 0.2</td>") != std::string::npos);
  // It leads with the answer: one verdict line per policy before any table, in the policies'
  // order, each saying what happened (the no-guard policy crashed, tests/data/plot/tiny-run.yaml).
  const size_t verdict = html.find("<h2>Verdict</h2><ul class=\"verdict\"><li>no-guard: ");
  REQUIRE(verdict != std::string::npos);
  CHECK(verdict < html.find("<table"));
  CHECK(html.find("OOM crash", verdict) < html.find("<li>reject: ", verdict));
  CHECK(html.find("<li>truncate: ", verdict) != std::string::npos);
  CHECK(html.find("; SLO met by ", verdict) != std::string::npos);
  CHECK(count(html, "<table class=\"sortable\">") >= 3);
  fs::remove_all(tmp);
}

// A run without `slo:` anywhere has no SLO columns and no SLO clause in its verdicts.
TEST_CASE("report of a run without an SLO shows no SLO columns") {
  REQUIRE_MATPLOTLIB();
  const std::string tmp = make_temp_dir("kvsim-report-no-slo");
  const auto run = run_cli("run '" + std::string(KVSIM_SOURCE_DIR) +
                           "/scenarios/native-vs-flash.yaml' -o '" + tmp + "/run'");
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const auto r = run_cli("report '" + tmp + "/run' -o '" + tmp + "/report.html'");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::string html = read_text(tmp + "/report.html");
  CHECK(html.find("<h2>Verdict</h2>") != std::string::npos);
  CHECK(html.find("<h2>KV pool</h2>") != std::string::npos);
  CHECK(html.find("<th>SLO attainment</th>") == std::string::npos);
  CHECK(html.find("SLO met by") == std::string::npos);
  fs::remove_all(tmp);
}

// A real (two-point, zip) sweep of the tiny scenario: its report's header names the kvsim that
// wrote the data and the sweep's scenario hash, both from sweep.json (a sweep folder has no
// manifest.json of its own), instead of "kvsim ?" and "scenario_hash none".
TEST_CASE("report of a sweep folder: header with the data's kvsim version and scenario hash") {
  REQUIRE_MATPLOTLIB();
  const std::string tmp = make_temp_dir("kvsim-report-sweep");
  const auto s = run_cli("sweep '" + kData + "/tiny-run.yaml' -o '" + tmp +
                         "/sweep' --jobs 2 "
                         "--set 'workload.duration_s=20' "
                         "--set 'sweep={zip: {seed: [7, 8], workload.clients.count: [4, 6]}}'");
  INFO(s.err);
  REQUIRE(s.exit_code == 0);
  const auto index = nlohmann::json::parse(read_text(tmp + "/sweep/sweep.json"));
  const std::string version = index.at("kvsim_version");
  const std::string hash = index.at("scenario_hash");
  CHECK(version.rfind("0.", 0) == 0);
  CHECK(hash.size() == 16);
  CHECK(index.at("axes") == nlohmann::json::parse(R"([["seed", "workload.clients.count"]])"));
  const auto r = run_cli("report '" + tmp + "/sweep' -o '" + tmp + "/report.html'");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::string html = read_text(tmp + "/report.html");
  CHECK(html.find("rendered by kvsim " + version + " · data from kvsim " + version +
                  " · scenario_hash " + hash + " · ") != std::string::npos);
  CHECK(html.find("kvsim ?") == std::string::npos);
  CHECK(html.find("scenario_hash none") == std::string::npos);
  CHECK(html.find("against the zipped keys (seed, workload.clients.count") != std::string::npos);
  // It leads with the best point for each metric, before any table.
  const size_t best =
      html.find("<h2>Best points</h2><ul class=\"verdict\"><li>highest availability: ");
  REQUIRE(best != std::string::npos);
  CHECK(best < html.find("<table"));
  CHECK(html.find("(seed=", best) != std::string::npos);
  CHECK(html.find("<li>lowest TTFT p99: ", best) != std::string::npos);
  fs::remove_all(tmp);
}

// Runs where /usr/bin/chromium exists: scripts/test.sh's set-up installs it (KVSIM_TEST_PACKAGES
// in scripts/setup.sh); plain run.sh set-ups and developer machines may skip it.
TEST_CASE("report loads in headless Chromium with every figure and no console message") {
  KVSIM_SKIP_UNDER_SANITIZER(kvsim::test::kFigureTimeIsPythons);
  REQUIRE_MATPLOTLIB();
  if (!fs::exists("/usr/bin/chromium")) {
    KVSIM_TEST_SKIP("browser",
                    "/usr/bin/chromium is not installed "
                    "(scripts/test.sh installs it; or apt-get install chromium)");
  }
  const std::string tmp = make_temp_dir("kvsim-report-chromium");
  const auto r = run_cli("report '" + tiny_run() + "' -o '" + tmp + "/report.html'");
  REQUIRE(r.exit_code == 0);

  // Control: a page that logs to the console must show up in the log, so an empty console
  // below means the report logged nothing, not that logging is off.
  {
    const std::string page = tmp + "/canary.html";
    std::ofstream(page) << "<html><body><script>console.error('kvsim-canary')</script>"
                           "</body></html>";
    const ChromiumRun c = chromium_dump("file://" + page, tmp);
    INFO(c.log);
    REQUIRE(c.status == 0);
    REQUIRE(console_lines(c.log).find("kvsim-canary") != std::string::npos);
  }

  const ChromiumRun c = chromium_dump("file://" + tmp + "/report.html", tmp);
  INFO(c.log);
  REQUIRE(c.status == 0);  // loaded within the timeout and exited cleanly
  CHECK(c.dom.find("</html>") != std::string::npos);
  CHECK(console_lines(c.log).empty());
  CHECK(c.dom.find("<ul class=\"verdict\"><li>no-guard: ") != std::string::npos);

  // The report's table sorter, run by Chromium on a small table: a click on a header sorts by
  // that column as numbers ("9.5%" < "10" < "1,200"), a second click reverses it.
  {
    const std::string report = read_text(tmp + "/report.html");
    const size_t open = report.find("<script>"), close = report.find("</script>");
    REQUIRE(open != std::string::npos);
    REQUIRE(close != std::string::npos);
    const std::string sorter = report.substr(open, close + 9 - open);
    const std::string page = tmp + "/sorted.html";
    std::ofstream(page)
        << "<html><body><table class=\"sortable\"><thead><tr><th>name</th><th>n</th></tr></thead>"
           "<tbody><tr><td>b</td><td>10</td></tr><tr><td>a</td><td>9.5%</td></tr>"
           "<tr><td>c</td><td>1,200</td></tr></tbody></table>"
        << sorter
        << "<script>function order(id) { document.body.insertAdjacentHTML('beforeend', '<p id=' + "
           "id + '>' + Array.from(document.querySelectorAll('tbody tr')).map(function (r) { "
           "return r.cells[0].textContent; }).join('') + '</p>'); }"
           "var th = document.querySelectorAll('th')[1]; th.click(); order('up'); th.click(); "
           "order('down');</script></body></html>";
    const ChromiumRun s = chromium_dump("file://" + page, tmp);
    INFO(s.log);
    REQUIRE(s.status == 0);
    CHECK(s.dom.find("<p id=\"up\">abc</p>") != std::string::npos);
    CHECK(s.dom.find("<p id=\"down\">cba</p>") != std::string::npos);
    CHECK(console_lines(s.log).empty());
  }
  // Every figure is an <img> whose data: URI decodes to the 700-px-wide PNG it was rendered as.
  CHECK(count(c.dom, "<img") == 5);
  const std::string key = "src=\"data:image/png;base64,";
  size_t images = 0;
  for (size_t at = c.dom.find(key); at != std::string::npos; at = c.dom.find(key, at + 1)) {
    const size_t begin = at + key.size();
    const size_t end = c.dom.find('"', begin);
    REQUIRE(end != std::string::npos);
    const std::string png = base64_decode(c.dom.substr(begin, end - begin));
    CHECK(png_size(png).width == 700);
    CHECK(png_size(png).height >= 300);
    ++images;
  }
  CHECK(images == 5);
  fs::remove_all(tmp);
}
