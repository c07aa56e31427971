"""Write a tiny llama-architecture GGUF model, made on the spot (no weights are downloaded).

Run with a Python that has the ``gguf`` and ``numpy`` packages (``./dev real-server`` sets one
up): ``python tests/real_server/tiny_gguf.py OUT.gguf [--llama-server]``.

The model is one transformer block with a character-level vocabulary (printable ASCII, the 256
byte tokens, ChatML's markers and the ``<tool_call>`` tags of Hermes-style tool calling) and a
ChatML chat template that renders tools and tool calls the way Qwen 2.5 does. Its weights are
small random numbers around a fixed preference for a few tokens, so what it does is predictable
enough to test with:

- made with ``--llama-server``, for llama.cpp's server (``llama-server --jinja --repeat-penalty
  1.5 --repeat-last-n 512 --temp 0.1``, as ``./dev real-server --cpp`` starts it), it answers a
  request that offers tools with a ``list_dir`` call with ``{}`` as arguments: a newline is its
  favourite token, but the repeat penalty (a recent token's logit divided by 1.5) puts
  "<tool_call>" first when the prompt ends in newlines, and the newline right after it; once the
  server sees "<tool_call>" and a newline, the grammar it derives from the tool schemas keeps the
  call well-formed ("l" picks list_dir, "}" closes the arguments);
- once a tool result is in the context it ends its turn at once (an empty reply), so a real tool
  round trip ends by itself;
- made without ``--llama-server``, for servers that do not parse tool calls (llama-cpp-python's,
  which also has no default token limit), it writes a few tokens and ends its turn.

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

# Logit bonus per token. A newline beats everything, but the repeat penalty (which divides a
# recent token's logit by 1.5) brings it below "<tool_call>" when the prompt ends in newlines, and
# then above the end of turn right after "<tool_call>". Inside a call "l" picks list_dir among the
# tools and "}" closes its arguments.
NEWLINE_PREFERENCE = 15.0  # with --llama-server only
TOOL_RESULT_GAIN = 8000.0  # one tool result in 4000 tokens of context: 2.0 in dimension 0
AFTER_TOOL_RESULT_BONUS = 8.0  # per unit of dimension 0, for the end of turn
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


def write_model(path: Path, *, for_llama_server: bool) -> None:
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

    # Dimension 0 counts tool results: only "</tool_response>" has it in its embedding. Queries
    # and keys are zero, so attention is uniform over the context and carries (count / length)
    # of it, amplified by the output projection, into the last position, where it raises the end
    # of turn above everything: once a tool result is in the context the model ends its turn.
    # The other 63 dimensions hold the same vector for every token, so elsewhere the logits are
    # PREFERENCES (plus noise) whatever came before.
    embedding = np.ones((n_vocab, N_EMBD), dtype=np.float32) + small(n_vocab, N_EMBD)
    embedding[:, 0] = 0.0
    embedding[tokens.index("</tool_response>"), 0] = 1.0
    output = small(n_vocab, N_EMBD)
    output[:, 0] = 0.0
    preferences = dict(PREFERENCES)
    if for_llama_server:
        preferences["\n"] = NEWLINE_PREFERENCE
    for token, bonus in preferences.items():
        output[tokens.index(token), 1:] += bonus / (N_EMBD - 1)
    output[tokens.index("<|im_end|>"), 0] = AFTER_TOOL_RESULT_BONUS
    value = np.zeros((N_EMBD, N_EMBD), dtype=np.float32)
    value[0, 0] = 1.0
    projection = np.zeros((N_EMBD, N_EMBD), dtype=np.float32)
    projection[0, 0] = TOOL_RESULT_GAIN
    zero = np.zeros((N_EMBD, N_EMBD), dtype=np.float32)
    ones = np.ones(N_EMBD, dtype=np.float32)
    writer.add_tensor("token_embd.weight", embedding)
    writer.add_tensor("output_norm.weight", ones)
    writer.add_tensor("output.weight", output)
    writer.add_tensor("blk.0.attn_norm.weight", ones)
    writer.add_tensor("blk.0.attn_q.weight", zero)
    writer.add_tensor("blk.0.attn_k.weight", zero)
    writer.add_tensor("blk.0.attn_v.weight", value)
    writer.add_tensor("blk.0.attn_output.weight", projection)
    writer.add_tensor("blk.0.ffn_norm.weight", ones)
    writer.add_tensor("blk.0.ffn_gate.weight", small(N_FF, N_EMBD))
    writer.add_tensor("blk.0.ffn_up.weight", small(N_FF, N_EMBD))
    writer.add_tensor("blk.0.ffn_down.weight", small(N_EMBD, N_FF))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == "__main__":
    args = sys.argv[1:]
    llama_server = "--llama-server" in args
    paths = [arg for arg in args if arg != "--llama-server"]
    if len(paths) != 1:
        sys.exit("usage: tiny_gguf.py OUT.gguf [--llama-server]")
    write_model(Path(paths[0]), for_llama_server=llama_server)
    print(f"wrote {paths[0]}")
