// Claim: a kept case reads and writes back to the same bytes: every case text in the repository's
// kept files (corpus/regressions, examples), read as the precision it names, is written out as it
// was read. The case text is a format of its own that outlives the code (docs/checking.md, "Keeping
// a failure"): a writer that moved a word, dropped a line or spelled a value another way fails here.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "attncheck/case_text.hpp"
#include "attncheck/cases.hpp"

namespace attncheck {
namespace {

// Each "case ..." to "end" section of the file at `path`, as its lines hold it.
std::vector<std::string> case_sections(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<std::string> sections;
  std::string section;
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("case ", 0) == 0) inside = true, section.clear();
    if (inside) section += line + "\n";
    if (inside && line == "end") inside = false, sections.push_back(section);
  }
  return sections;
}

// The case text `text` read and written again.
std::string rewritten(const std::string& text) {
  return visit_case_text(text, [](auto c) { return case_to_text(c); });
}

TEST(CaseText, KeptFilesReadAndWriteTheSameBytes) {
  int cases = 0;
  for (const char* dir : {"corpus/regressions", "examples"})
    for (const auto& entry : std::filesystem::recursive_directory_iterator(std::filesystem::path(ATTNCHECK_SOURCE_DIR) / dir))
      if (entry.path().extension() == ".replay")
        for (const std::string& text : case_sections(entry.path())) {
          EXPECT_EQ(rewritten(text), text) << entry.path();
          ++cases;
        }
  EXPECT_GE(cases, 9) << "the kept files hold fewer cases than they did";
}

// Every scalar line the format has, written by hand from docs/checking.md's grammar: read into the
// values it spells, and written back to the same bytes.
TEST(CaseText, EveryScalarLineReadsAndWritesBack) {
  const std::string text =
      "case float32 1\n"
      "shape B 1 H 1 H_kv 1 Tq 1 Tk 2 dk 1 dv 1\n"
      "options causal lower-right scale 0x1p-1 empty-rows mean lse-empty zero\n"
      "window 3 0\n"
      "softcap 0x1.4p+5\n"
      "dropout 0x1p-2 12345\n"
      "mix by hand\n"
      "q 3f800000\n"
      "k 3f800000 bf800000\n"
      "v 00000000 3f800000\n"
      "end\n";
  std::istringstream in(text);
  std::string first;
  std::getline(in, first);
  const Case<float> c = case_from_text<float>(first, in);
  EXPECT_EQ(c.causal, Causal::lower_right);
  EXPECT_EQ(c.scale, 0.5);
  EXPECT_EQ(c.empty_rows, EmptyRows::mean);
  EXPECT_EQ(c.lse_empty, LseEmpty::zero);
  EXPECT_EQ(c.window_left, 3);
  EXPECT_EQ(c.window_right, 0);
  EXPECT_EQ(c.softcap, 40.0);
  EXPECT_EQ(c.dropout_p, 0.25);
  EXPECT_EQ(c.dropout_seed, 12345u);
  EXPECT_EQ(c.mix, "by hand");
  EXPECT_EQ(case_to_text(c), text);
}

// A paged case (issue 39), written by hand: the shape line's NB, BS, BPS after dv, the pools k [NB,
// H_kv,BS,dk] and v, and the block table [B,BPS] on its feature's line ("paged"), read into a paged
// shape, its pools and its table, and written back to the same bytes.
TEST(CaseText, APagedCaseReadsAndWritesBack) {
  const std::string text =
      "case float32 1\n"
      "shape B 2 H 1 H_kv 1 Tq 1 Tk 3 dk 1 dv 1 NB 3 BS 2 BPS 2\n"
      "options causal none scale 0x0p+0 empty-rows zero\n"
      "mix by hand\n"
      "q 3f800000 3f800000\n"
      "k 3f800000 7fc00000 00000000 3f800000 bf800000 40000000\n"
      "v 00000000 7fc00000 3f800000 40000000 40400000 40800000\n"
      "paged 2 0 1 2\n"
      "end\n";
  std::istringstream in(text);
  std::string first;
  std::getline(in, first);
  const Case<float> c = case_from_text<float>(first, in);
  EXPECT_TRUE(c.shape.paged());
  EXPECT_EQ(c.shape.NB, 3);
  EXPECT_EQ(c.shape.BS, 2);
  EXPECT_EQ(c.shape.BPS, 2);
  EXPECT_EQ(c.block_table, (std::vector<int32_t>{2, 0, 1, 2}));
  EXPECT_EQ(c.k.size(), 6u);
  // Batch 0's keys: block 2's two slots, then block 0's first (its second, NaN, past Tk); batch 1's:
  // block 1's two, then block 2's first, which batch 0 reads too.
  EXPECT_EQ(dense_twin(c).k, (std::vector<float>{-1, 2, 1, 0, 1, -1}));
  EXPECT_EQ(case_to_text(c), text);
}

// A varlen case (issue 39), written by hand: the shape line's S = B + 1 after dv, q [H,Tq,dk], k and v
// packed, each cu_seqlens on a line of its own name; read into a varlen shape whose dense twin masks
// each sequence at its own lengths (lower-right: sequence 0, one query and no key, sees nothing;
// sequence 1's two queries see its two keys from its own diagonal), and written back to the same bytes.
TEST(CaseText, AVarlenCaseReadsAndWritesBack) {
  const std::string text =
      "case float32 1\n"
      "shape B 2 H 1 H_kv 1 Tq 3 Tk 2 dk 1 dv 1 S 3\n"
      "options causal lower-right scale 0x0p+0 empty-rows zero\n"
      "mix by hand\n"
      "q 3f800000 3f800000 3f800000\n"
      "k 3f800000 00000000\n"
      "v 3f800000 40000000\n"
      "cu_seqlens_q 0 1 3\n"
      "cu_seqlens_k 0 0 2\n"
      "end\n";
  std::istringstream in(text);
  std::string first;
  std::getline(in, first);
  const Case<float> c = case_from_text<float>(first, in);
  EXPECT_TRUE(c.shape.varlen);
  EXPECT_EQ(c.cu_seqlens_q, (std::vector<int32_t>{0, 1, 3}));
  EXPECT_EQ(c.cu_seqlens_k, (std::vector<int32_t>{0, 0, 2}));
  const Case<float> twin = dense_twin(c);
  EXPECT_EQ(twin.shape.B, 1);
  EXPECT_EQ(twin.allow, (std::vector<uint8_t>{0, 0, 1, 0, 1, 1}));
  EXPECT_EQ(twin.causal, Causal::none);
  EXPECT_EQ(case_to_text(c), text);
  for (const char* wrong : {"cu_seqlens_q 0 1 2\n", "cu_seqlens_q 1 1 3\n", "cu_seqlens_q 0 2 1\n"}) {
    std::string bad_text = text;
    bad_text.replace(bad_text.find("cu_seqlens_q 0 1 3\n"), 19, wrong);
    std::istringstream bad_in(bad_text);
    std::getline(bad_in, first);
    EXPECT_THROW(case_from_text<float>(first, bad_in), std::runtime_error) << wrong;
  }
}

// A line missing a word, an option out of order or of another name, a value of no choice: each
// refused with a one-line reason.
TEST(CaseText, MalformedScalarLinesAreRefused) {
  const std::string head = "case float32 1\nshape B 1 H 1 H_kv 1 Tq 1 Tk 1 dk 1 dv 1\n";
  const std::string tail = "q 3f800000\nk 3f800000\nv 3f800000\nend\n";
  for (const char* lines :
       {"options causal none empty-rows zero scale 0x0p+0\n", "options causal sideways scale 0x0p+0 empty-rows zero\n",
        "options causal none scale 0x0p+0 empty-rows some\n", "options causal none scale 0x0p+0 empty-rows zero lse-empty\n",
        "options causal none scale 0x0p+0 empty-rows zero more\n", "options causal none scale 0x0p+0 empty-rows zero\nwindow 3\n",
        "options causal none scale 0x0p+0 empty-rows zero\ndropout 0x1p-2 -1\n",
        "options causal none scale zero empty-rows zero\n"}) {
    std::istringstream in(head + std::string(lines) + tail);
    std::string first;
    std::getline(in, first);
    EXPECT_THROW(case_from_text<float>(first, in), std::runtime_error) << lines;
  }
}

}  // namespace
}  // namespace attncheck
