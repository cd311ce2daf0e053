#!/usr/bin/env python3
"""Renders conversation.json through each chat template the way Hugging
Face transformers does (apply_chat_template: a sandboxed Jinja2
environment with trim_blocks, lstrip_blocks and loop controls, and a
tojson that keeps key order and non-ASCII text), writing NAME.golden.
These files are the oracle of api's TestToolChatGolden; regenerate them
with `python3 render.py` (needs the jinja2 package) after changing the
conversation or a template.

Call arguments go in as objects, as Hugging Face documents them, except
for templates that concatenate them as strings (DeepSeek's), which get
the JSON text. Templates that do not render tools get none."""
import json
import os

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATES = os.path.join(HERE, "..", "templates")


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def main():
    conv = json.load(open(os.path.join(HERE, "conversation.json"), encoding="utf-8"))
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    for name in sorted(os.listdir(TEMPLATES)):
        if not name.endswith(".jinja"):
            continue
        src = open(os.path.join(TEMPLATES, name), encoding="utf-8").read()
        messages = json.loads(json.dumps(conv["messages"]))
        if "arguments | tojson" not in src and "arguments|tojson" not in src and "arguments'] | tojson" not in src:
            for m in messages:
                for c in m.get("tool_calls", []):
                    c["function"]["arguments"] = json.dumps(c["function"]["arguments"], ensure_ascii=False)
        tools = conv["tools"] if "tools" in src else None
        out = env.from_string(src).render(messages=messages, tools=tools, add_generation_prompt=True, bos_token="<s>", eos_token="</s>")
        with open(os.path.join(HERE, name[: -len(".jinja")] + ".golden"), "w", encoding="utf-8") as f:
            f.write(out)


if __name__ == "__main__":
    main()
