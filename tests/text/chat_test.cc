// Chat rendering byte-identical to jinja2 (as transformers runs it) on the real templates,
// multi-turn, with and without system prompts (fixtures: tools/text/gen_chat_fixtures.py).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <cjson/cJSON.h>

extern "C" {
#include "core/base/alloc.h"
#include "core/text/chat.h"
}

namespace {

std::string Slurp(const char *path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(Chat, MatchesJinjaOnEveryCase) {
  std::string js = Slurp("tests/text/fixtures/chat_cases.json");
  cJSON *doc = cJSON_ParseWithLength(js.data(), js.size());
  ASSERT_NE(nullptr, doc);
  const cJSON *templates = cJSON_GetObjectItem(doc, "templates");
  const cJSON *c;
  std::map<std::string, int> ok, errors;
  cJSON_ArrayForEach(c, cJSON_GetObjectItem(doc, "cases")) {
    std::string name = cJSON_GetStringValue(cJSON_GetObjectItem(c, "template"));
    const char *tmpl = cJSON_GetStringValue(cJSON_GetObjectItem(templates, name.c_str()));
    ASSERT_NE(nullptr, tmpl) << name;
    std::vector<memra_chat_msg> msgs;
    const cJSON *m;
    std::string desc;
    cJSON_ArrayForEach(m, cJSON_GetObjectItem(c, "messages")) {
      msgs.push_back({cJSON_GetStringValue(cJSON_GetObjectItem(m, "role")),
                      cJSON_GetStringValue(cJSON_GetObjectItem(m, "content"))});
      desc += std::string(msgs.back().role) + " ";
    }
    bool gen = cJSON_IsTrue(cJSON_GetObjectItem(c, "add_generation_prompt"));
    const cJSON *exp = cJSON_GetObjectItem(c, "expected");
    char *out = nullptr;
    memra_err err = {};
    memra_status st = memra_chat_render(
        tmpl, msgs.data(), msgs.size(), gen, cJSON_GetStringValue(cJSON_GetObjectItem(c, "bos")),
        cJSON_GetStringValue(cJSON_GetObjectItem(c, "eos")), &out, &err);
    if (cJSON_IsNull(exp)) { // the template raises: we must refuse too, with a message
      EXPECT_EQ(MEMRA_E_INVALID, st) << name << ": " << desc;
      EXPECT_NE(0, err.msg[0]);
      errors[name]++;
    } else {
      ASSERT_EQ(MEMRA_OK, st) << name << ": " << desc << err.msg;
      EXPECT_EQ(std::string(exp->valuestring), std::string(out))
          << name << ": " << desc << " gen=" << gen;
      ok[name]++;
    }
    memra_free(out);
  }
  cJSON_Delete(doc);
  for (const char *n : {"smollm2", "qwen3", "llama3", "llama3_1", "llama2", "mistral", "mistral_v3",
                        "gemma2", "gemma3"})
    EXPECT_GE(ok[n], 14) << n; // multi-turn, with and without a system prompt
  EXPECT_GE(errors["mistral"], 4);
}

TEST(Chat, UnknownTemplateIsAClearError) {
  memra_chat_msg m[] = {{"user", "hi"}};
  char *out = nullptr;
  memra_err err = {};
  EXPECT_EQ(MEMRA_E_UNSUPPORTED,
            memra_chat_render("{{ messages }}", m, 1, true, "", "", &out, &err));
  EXPECT_STREQ("chat: template not recognized (known families: ChatML, Llama 3/3.1, Llama 2, "
               "Mistral, Gemma)",
               err.msg);
  EXPECT_EQ(nullptr, out);
  EXPECT_EQ(MEMRA_E_INVALID, memra_chat_render(nullptr, m, 1, true, "", "", &out, &err));
  memra_chat_msg bad[] = {{"user", nullptr}};
  EXPECT_EQ(MEMRA_E_INVALID,
            memra_chat_render(memra_chat_builtin("chatml"), bad, 1, true, "", "", &out, &err));
  EXPECT_STREQ("chat: message 0 has no role or content", err.msg);
}

TEST(Chat, BuiltinFallbacksRender) {
  memra_chat_msg m[] = {{"user", " hi "}};
  char *out = nullptr;
  memra_err err = {};
  ASSERT_EQ(MEMRA_OK,
            memra_chat_render(memra_chat_builtin("chatml"), m, 1, true, "<s>", "</s>", &out, &err));
  EXPECT_STREQ("<|im_start|>user\n hi <|im_end|>\n<|im_start|>assistant\n", out);
  memra_free(out);
  ASSERT_EQ(MEMRA_OK,
            memra_chat_render(memra_chat_builtin("gemma"), m, 1, false, "<bos>", "", &out, &err));
  EXPECT_STREQ("<bos><start_of_turn>user\nhi<end_of_turn>\n", out);
  memra_free(out);
  EXPECT_EQ(nullptr, memra_chat_builtin("nope"));
}

} // namespace

// The next turn keeps the common prefix of the cached history and its ids, less one token so it
// evaluates at least one; a recurrent state (hybrid models) holds all the cached tokens, so a
// shorter match starts the turn over (a state cut back to a prefix would be a wrong state).
TEST(ChatReuse, PrefixAndRecurrentAllOrNothing) {
  const int32_t cached[] = {1, 50, 7, 300, 12};
  const int32_t same_then_more[] = {1, 50, 7, 300, 12, 9, 4};
  const int32_t differs_at_3[] = {1, 50, 7, 301, 12, 9};
  EXPECT_EQ(5, memra_chat_reuse(cached, 5, same_then_more, 7, false));
  EXPECT_EQ(5, memra_chat_reuse(cached, 5, same_then_more, 7, true));
  EXPECT_EQ(3, memra_chat_reuse(cached, 5, differs_at_3, 6, false));
  EXPECT_EQ(0, memra_chat_reuse(cached, 5, differs_at_3, 6, true));
  // the ids are the history itself: one token is evaluated again
  EXPECT_EQ(4, memra_chat_reuse(cached, 5, cached, 5, false));
  EXPECT_EQ(0, memra_chat_reuse(cached, 5, cached, 5, true));
  EXPECT_EQ(0, memra_chat_reuse(cached, 0, same_then_more, 7, true));
  EXPECT_EQ(0, memra_chat_reuse(nullptr, 0, same_then_more, 7, false));
}
