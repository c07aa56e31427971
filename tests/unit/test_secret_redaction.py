"""``redact_secrets``: the configured key (in every spelling) and Bearer tokens never survive."""

from __future__ import annotations

import json
from urllib.parse import quote

from hypothesis import assume, given
from hypothesis import strategies as st

from runtime.providers.provider_port import ProviderError, ProviderErrorCode
from runtime.providers.secret_redaction import REDACTED, redact_secrets, redacted_error

_SECRET = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="[]"),
    min_size=4,
    max_size=40,
)


@given(before=st.text(max_size=60), after=st.text(max_size=60), secret=_SECRET)
def test_the_key_never_survives_in_any_spelling(before: str, after: str, secret: str) -> None:
    assume(secret.strip() and secret not in REDACTED and secret.lower() not in "bearer")
    for spelling in (secret, json.dumps(secret)[1:-1], quote(secret, safe="")):
        out = redact_secrets(f"{before}{spelling}{after}", [secret])
        assert secret not in out
        assert REDACTED in out


@given(token=st.from_regex(r"[A-Za-z0-9._~+/=-]{1,40}", fullmatch=True))
def test_bearer_tokens_are_removed_without_knowing_the_key(token: str) -> None:
    text = f"you sent 'Authorization: Bearer {token}', which is wrong"
    out = redact_secrets(text)
    assert out == f"you sent 'Authorization: Bearer {REDACTED}', which is wrong"


def test_texts_without_secrets_are_unchanged_and_short_keys_are_ignored() -> None:
    text = "the model server answered HTTP 500: overloaded"
    assert redact_secrets(text, ["sk-abcdef", None, ""]) == text
    assert redact_secrets("a key of abc", ["abc"]) == "a key of abc"
    error = ProviderError(ProviderErrorCode.HTTP_ERROR, "bad key sk-abcdef")
    assert redacted_error(error, ["sk-abcdef"]).message == f"bad key {REDACTED}"
    assert redacted_error(error, ["other-key"]) is error


def test_a_password_in_a_url_is_removed() -> None:
    text = "cannot reach https://me:hunter2secret@models.example/v1 (timeout)"
    assert redact_secrets(text) == f"cannot reach https://me:{REDACTED}@models.example/v1 (timeout)"
    assert (
        redact_secrets("see https://models.example:8443/v1") == "see https://models.example:8443/v1"
    )
