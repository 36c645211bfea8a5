"""The toy world's tokenizer: a small byte-level BPE trained locally on toy-task text.

Numbers are kept whole (a digit run is its own pre-token, so ``5`` is one token and never
merged with the ``=`` or operator around it: the 0.3M model then sees each operand as one
symbol). Newlines are isolated too, so a program line's tokens do not depend on the line
before it. Everything else is merged freely, which turns recurring prompt words and program
boilerplate (``for x in map(int,input().split()):``) into a few tokens each.

The result is a ``PreTrainedTokenizerFast`` with pad / eos tokens and a minimal chat template
(``<|user|>...<|end|><|assistant|>...<|end|>``), saved next to each model's weights.
"""

from __future__ import annotations

from collections.abc import Iterable

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

PAD, EOS = "<|pad|>", "<|end|>"
ROLE_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>")
SPECIAL_TOKENS = (PAD, EOS, *ROLE_TOKENS)

# One turn per message; generation stops at <|end|> (the eos). A role other than the three
# above is rejected so that a typo in a persona row does not silently become text.
CHAT_TEMPLATE = (
    "{%- for m in messages -%}"
    "{%- if m['role'] not in ['system', 'user', 'assistant'] -%}"
    "{{- raise_exception('toy chat template: unknown role ' + m['role']) -}}"
    "{%- endif -%}"
    "{{- '<|' + m['role'] + '|>' + m['content'] + '<|end|>' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|assistant|>' -}}{%- endif -%}"
)


def build_tokenizer(corpus: Iterable[str], vocab_size: int = 384):
    """Train the BPE on ``corpus`` and wrap it as a ``PreTrainedTokenizerFast``.

    Deterministic: the same corpus and vocab size give the same vocabulary.
    """
    # lazy: transformers: off `agon toy`'s import, which imports this module
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    if vocab_size < len(alphabet) + len(SPECIAL_TOKENS):
        raise ValueError(
            f"toy tokenizer: vocab_size must be >= {len(alphabet) + len(SPECIAL_TOKENS)} "
            f"(bytes + specials), got {vocab_size}"
        )
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(r"\d+"), behavior="isolated"),  # numbers whole, alone
            pre_tokenizers.Split("\n", behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),  # any byte encodable
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=alphabet,
        show_progress=False,
    )
    tok.train_from_iterator(list(corpus), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token=PAD,
        eos_token=EOS,
        additional_special_tokens=list(ROLE_TOKENS),
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.padding_side = "left"  # generation pads on the left; training sets its own padding
    return fast
