// `memra tokenize`: vocabulary from GGUF or tokenizer.json, -p / -f / stdin, --no-bos,
// --special, --jsonl, and one-line errors with the documented exit statuses.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern "C" {
#include "tools/cli/cmd_tokenize.h"
}

namespace {

struct Result {
  int rc;
  std::string out, err;
};

std::string ReadAll(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Runs the subcommand with stdout and stderr captured in files.
Result RunCmd(std::vector<std::string> args) {
  args.insert(args.begin(), "tokenize");
  std::vector<char *> argv;
  for (auto &a : args)
    argv.push_back(&a[0]);
  std::string dir = testing::TempDir();
  std::string o = dir + "/tok_out", e = dir + "/tok_err";
  fflush(stdout);
  fflush(stderr);
  int so = dup(1), se = dup(2);
  int fo = open(o.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  int fe = open(e.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  dup2(fo, 1);
  dup2(fe, 2);
  int rc = memra_cmd_tokenize(int(argv.size()), argv.data());
  fflush(stdout);
  fflush(stderr);
  dup2(so, 1);
  dup2(se, 2);
  close(so), close(se), close(fo), close(fe);
  return {rc, ReadAll(o), ReadAll(e)};
}

const char *kSmol = "tests/text/data/smollm2_vocab.gguf";
const char *kLlama2 = "tests/text/data/llama2/tokenizer.json";

TEST(CmdTokenize, GgufAndTokenizerJson) {
  Result r = RunCmd({"-m", kSmol, "-p", "Hello world"});
  EXPECT_EQ(0, r.rc) << r.err;
  EXPECT_EQ("[19556,905]\n", r.out);
  r = RunCmd({"-m", kSmol, "-p", "<|im_start|>user", "--special"});
  EXPECT_EQ("[1,4093]\n", r.out);
  r = RunCmd({"-m", kSmol, "-p", "<|im_start|>user"});
  EXPECT_NE("[1,4093]\n", r.out); // without --special the text is plain characters
  r = RunCmd({"--tokenizer-json", kLlama2, "-p", "Hello world"});
  EXPECT_EQ(0, r.rc) << r.err;
  EXPECT_EQ("[1,22557,1526]\n", r.out); // Llama 2 adds BOS
  r = RunCmd({"--tokenizer-json", kLlama2, "-p", "Hello world", "--no-bos"});
  EXPECT_EQ("[22557,1526]\n", r.out);
}

TEST(CmdTokenize, JsonlOneArrayPerLine) {
  std::string in = testing::TempDir() + "/lines.jsonl";
  std::ofstream(in) << "\"Hello world\"\n\"<|im_start|>user\"\n\n\"caf\\u00e9\\nx\"\n";
  Result r = RunCmd({"-m", kSmol, "--jsonl", "--special", "-f", in});
  EXPECT_EQ(0, r.rc) << r.err;
  Result a = RunCmd({"-m", kSmol, "-p", "café\nx"});
  EXPECT_EQ("[19556,905]\n[1,4093]\n" + a.out, r.out);
  std::ofstream(in) << "\"ok\"\n[1,2]\n";
  r = RunCmd({"-m", kSmol, "--jsonl", "-f", in});
  EXPECT_EQ(1, r.rc);
  EXPECT_EQ("memra tokenize: line 2: expected a JSON string\n", r.err);
}

TEST(CmdTokenize, ErrorsAreOneLineWithStatus) {
  Result r = RunCmd({"-p", "x"});
  EXPECT_EQ(2, r.rc);
  EXPECT_EQ(0u, r.err.find("memra tokenize: give exactly one of -m FILE.gguf or --tokenizer-json"));
  r = RunCmd({"-m", kSmol, "--bogus"});
  EXPECT_EQ(2, r.rc);
  EXPECT_EQ(0u, r.err.find("memra tokenize: unknown or incomplete argument '--bogus'"));
  r = RunCmd({"-m", kSmol, "-f", "/nonexistent/text"});
  EXPECT_EQ(1, r.rc);
  EXPECT_EQ("memra tokenize: /nonexistent/text: cannot open\n", r.err);
  r = RunCmd({"--tokenizer-json", "/nonexistent/tokenizer.json", "-p", "x"});
  EXPECT_EQ(1, r.rc);
  EXPECT_EQ("memra tokenize: /nonexistent/tokenizer.json: cannot open\n", r.err);
  r = RunCmd({"-m", kSmol, "-p", "bad \xC3\x28"});
  EXPECT_EQ(1, r.rc);
  EXPECT_NE(std::string::npos, r.err.find("not valid UTF-8")) << r.err;
  EXPECT_EQ("", r.out);
}

} // namespace
