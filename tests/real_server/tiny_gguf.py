"""Write a tiny llama-architecture GGUF model, made on the spot (no weights are downloaded).

Run with a Python that has the ``gguf`` and ``numpy`` packages (``./dev real-server`` sets one
up): ``python tests/real_server/tiny_gguf.py OUT.gguf``.

The model is one transformer block with a character-level vocabulary (printable ASCII, the 256
byte tokens, ChatML's markers and the ``<tool_call>`` tags of Hermes-style tool calling) and a
ChatML chat template that renders tools and tool calls the way Qwen 2.5 does. Its weights are
small random numbers around a fixed preference for a few tokens, so what it does is predictable
enough to test with:

- on llama.cpp's server (``llama-server --jinja``) it answers a fresh request that offers tools
  with a ``list_dir`` call with ``{}`` as arguments (the grammar the server derives from the tool
  schemas keeps the call well-formed); started with ``--repeat-penalty 1.5 --repeat-last-n 512``
  it answers the tool's result with a short text or an empty reply, so a real tool round trip
  ends by itself;
- on any server it writes a few random characters, or nothing, and ends its turn.

It knows nothing: it exists to exercise a real server end to end.
"""

from __future__ import annotations

import string
import sys
from pathlib import Path

import gguf
import numpy as np

N_EMBD = 64
N_HEAD = 4
N_FF = 128
N_CTX = 16384
SEED = 16

# Logit bonus per token: "<tool_call>" starts a tool call; the end of turn comes next, then a
# little text; inside a call "l" picks list_dir among the tools and "}" closes its arguments.
PREFERENCES = {
    "<tool_call>": 12.0,
    "<|im_end|>": 9.5,
    "f": 9.0,
    "l": 8.0,
    "}": 7.0,
    '"': 4.0,
}
TAGS = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<tools>", "</tools>")
CHAT_TEMPLATE = (
    "{%- if tools %}{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] }}{%- endif %}"
    "{{- '\\n\\n# Tools\\n\\nFor each function call, return a json object with function name "
    'and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": '
    '<function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call>\\n\\nYou are '
    "provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}"
    "{{- '\\n</tools><|im_end|>\\n' }}"
    "{%- elif messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if (message.role == 'user') or (message.role == 'system' and not loop.first)"
    " or (message.role == 'assistant' and not message.tool_calls) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- elif message.role == 'assistant' %}{{- '<|im_start|>' + message.role }}"
    "{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}"
    "{%- for tool_call in message.tool_calls %}"
    "{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}"
    '{{- \'\\n<tool_call>\\n{\\"name\\": \\"\' }}{{- tool_call.name }}'
    '{{- \'\\", \\"arguments\\": \' }}'
    "{%- if tool_call.arguments is string %}{{- tool_call.arguments }}"
    "{%- else %}{{- tool_call.arguments | tojson }}{%- endif %}"
    "{{- '}\\n</tool_call>' }}{%- endfor %}{{- '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != 'tool') %}"
    "{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}"
    "{%- if loop.last or (messages[loop.index0 + 1].role != 'tool') %}"
    "{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def vocabulary() -> tuple[list[str], list[int]]:
    tokens = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
    types = [gguf.TokenType.UNKNOWN] + [gguf.TokenType.CONTROL] * 4
    for tag in TAGS:
        tokens.append(tag)
        types.append(gguf.TokenType.USER_DEFINED)
    for byte in range(256):
        tokens.append(f"<0x{byte:02X}>")
        types.append(gguf.TokenType.BYTE)
    for char in string.printable:
        if char not in " \t\r\x0b\x0c":
            tokens.append(char)
            types.append(gguf.TokenType.NORMAL)
    tokens.append("\u2581")  # SentencePiece's space
    types.append(gguf.TokenType.NORMAL)
    return tokens, [int(kind) for kind in types]


def write_model(path: Path) -> None:
    tokens, types = vocabulary()
    n_vocab = len(tokens)
    rng = np.random.default_rng(SEED)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("maka-tiny-test-model")
    writer.add_context_length(N_CTX)
    writer.add_embedding_length(N_EMBD)
    writer.add_block_count(1)
    writer.add_feed_forward_length(N_FF)
    writer.add_head_count(N_HEAD)
    writer.add_head_count_kv(N_HEAD)
    writer.add_rope_dimension_count(N_EMBD // N_HEAD)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores([0.0] * n_vocab)
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(tokens.index("<|im_end|>"))
    writer.add_unk_token_id(0)
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHAT_TEMPLATE)

    def small(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.01).astype(np.float32)

    # Every token embeds to (nearly) the same vector and the block adds little to it, so the
    # logits are (nearly) PREFERENCES whatever came before.
    embedding = np.ones((n_vocab, N_EMBD), dtype=np.float32) + small(n_vocab, N_EMBD)
    output = small(n_vocab, N_EMBD)
    for token, bonus in PREFERENCES.items():
        output[tokens.index(token)] += bonus / N_EMBD
    ones = np.ones(N_EMBD, dtype=np.float32)
    writer.add_tensor("token_embd.weight", embedding)
    writer.add_tensor("output_norm.weight", ones)
    writer.add_tensor("output.weight", output)
    writer.add_tensor("blk.0.attn_norm.weight", ones)
    for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
        writer.add_tensor(f"blk.0.{name}.weight", small(N_EMBD, N_EMBD))
    writer.add_tensor("blk.0.ffn_norm.weight", ones)
    writer.add_tensor("blk.0.ffn_gate.weight", small(N_FF, N_EMBD))
    writer.add_tensor("blk.0.ffn_up.weight", small(N_FF, N_EMBD))
    writer.add_tensor("blk.0.ffn_down.weight", small(N_EMBD, N_FF))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: tiny_gguf.py OUT.gguf")
    write_model(Path(sys.argv[1]))
    print(f"wrote {sys.argv[1]}")
