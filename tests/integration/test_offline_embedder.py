"""The real MiniLM int8 model on onnxruntime, with the vendored tokenizer."""

from __future__ import annotations

import hashlib
import math
import shutil
import threading
from pathlib import Path

import pytest
from tokenizers import Tokenizer

import engram.adapters.embedders
from engram.adapters.embedders import MiniLMEmbedder, minilm_model
from engram.adapters.embedders.minilm_model import (
    KEPT_MODELS,
    ModelSettings,
    load_in_background,
    shared_model,
)
from engram.adapters.embedders.offline_minilm import MODEL_SHA256, default_model_path
from engram.domain.embedding import Embedding
from engram.services.ports import Embedder, EmbedderError

ASSETS = Path(engram.adapters.embedders.__file__).parent / "assets"

CAT = "The cat sat on the mat"
CAT_PARAPHRASE = "A cat was sitting on a rug"
REVENUE = "Quarterly revenue grew by 5 percent"


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    return MiniLMEmbedder()


def _norm(e: Embedding) -> float:
    return math.sqrt(sum(x * x for x in e.floats()))


def test_installed_model_matches_the_pinned_digest() -> None:
    assert hashlib.sha256(default_model_path().read_bytes()).hexdigest() == MODEL_SHA256


def test_vendored_tokenizer_is_bert_uncased_wordpiece() -> None:
    tokenizer = Tokenizer.from_file(str(ASSETS / "tokenizer.json"))
    tokenizer.no_padding()
    # Ids of bert-base-uncased's vocabulary, which MiniLM-L6-H384-uncased shares.
    assert tokenizer.encode(CAT).ids == [101, 1996, 4937, 2938, 2006, 1996, 13523, 102]
    assert (ASSETS / "LICENSE-all-MiniLM-L6-v2.txt").read_text().count("Apache License") >= 1


def test_shape_norm_and_identity(embedder: MiniLMEmbedder) -> None:
    assert isinstance(embedder, Embedder)
    vectors = embedder.embed([CAT, REVENUE, "", "🙂 émoji and ünïcode"])
    assert len(vectors) == 4
    for v in vectors:
        assert (v.model, v.dim) == ("minilm-l6-v2-int8", 384)
        assert _norm(v) == pytest.approx(1.0, abs=1e-4)


def test_deterministic(embedder: MiniLMEmbedder) -> None:
    first = embedder.embed([CAT, REVENUE])
    second = embedder.embed([CAT, REVENUE])
    assert [e.data for e in first] == [e.data for e in second]
    fresh = MiniLMEmbedder().embed([CAT])[0]
    assert fresh.cosine(first[0]) > 0.99999


def test_paraphrases_score_higher_than_unrelated_sentences(embedder: MiniLMEmbedder) -> None:
    cat, paraphrase, revenue = embedder.embed([CAT, CAT_PARAPHRASE, REVENUE])
    assert cat.cosine(paraphrase) > 0.6
    assert cat.cosine(revenue) < 0.2
    assert paraphrase.cosine(revenue) < 0.2
    # The fp32 sentence-transformers model gives 0.740 and -0.029 for these
    # pairs (computed once from the upstream weights); int8 must stay close,
    # which would not survive a wrong tokenizer, pooling or input.
    assert cat.cosine(paraphrase) == pytest.approx(0.740, abs=0.02)
    assert cat.cosine(revenue) == pytest.approx(-0.029, abs=0.02)


def test_batched_equals_one_by_one(embedder: MiniLMEmbedder) -> None:
    texts = [
        CAT,
        "short",
        REVENUE,
        "A considerably longer sentence, so that the batch pads the short ones with many [PAD] tokens "
        "whose vectors must not leak into the mean.",
        "",
        CAT_PARAPHRASE,
    ]
    small_batches = MiniLMEmbedder(batch_size=2).embed(texts)
    batched = embedder.embed(texts)
    single = [embedder.embed([t])[0] for t in texts]
    for b, s, sb in zip(batched, single, small_batches, strict=True):
        assert b.cosine(s) > 0.9999
        assert sb.cosine(s) > 0.9999


def test_order_is_kept_across_internal_batches_and_windows() -> None:
    # Texts of varied lengths are sorted inside a window; the result must
    # come back in input order (window = 2 * 8 = 16 texts here).
    embedder = MiniLMEmbedder(batch_size=2)
    texts = [("word " * (i % 7 + 1)) + str(i) for i in range(40)]
    batched = embedder.embed(texts)
    for i in (0, 5, 17, 39):
        assert batched[i].cosine(embedder.embed([texts[i]])[0]) > 0.9999


def test_long_text_is_truncated_without_error(embedder: MiniLMEmbedder) -> None:
    long_text = " ".join(f"token{i}" for i in range(5000))
    prefix_equal = long_text + " and a different tail that falls past the limit"
    a, b = embedder.embed([long_text, prefix_equal])
    assert a.dim == 384
    # Both are cut at 256 tokens, so the differing tail is not seen at all.
    assert a.cosine(b) > 0.9999


def test_truncation_is_at_256_tokens_not_the_tokenizer_files_128(embedder: MiniLMEmbedder) -> None:
    # Each of these words is one word piece: after 200 of them the tails sit
    # at positions ~201-220, inside the 256 limit but past the 128 that the
    # vendored tokenizer.json carries; after 300 they are past 256.
    words = ["apple", "river", "house", "green", "music"]
    tail_a = " cats dogs kittens puppies pets fur paws whiskers tails meow"
    tail_b = " finance revenue profit taxes audit bonds stocks loans debt budget"
    inside_a, inside_b = embedder.embed([" ".join(words * 40) + tail_a, " ".join(words * 40) + tail_b])
    assert inside_a.cosine(inside_b) < 0.999
    past_a, past_b = embedder.embed([" ".join(words * 60) + tail_a, " ".join(words * 60) + tail_b])
    assert past_a.cosine(past_b) > 0.99999


def test_empty_input(embedder: MiniLMEmbedder) -> None:
    assert embedder.embed([]) == []


def test_construction_is_lazy(tmp_path: Path) -> None:
    # A missing file is only noticed on first use: constructing costs nothing.
    embedder = MiniLMEmbedder(model_path=tmp_path / "absent.onnx")
    with pytest.raises(EmbedderError, match="cannot read the MiniLM model"):
        embedder.embed(["x"])


def test_sha256_mismatch_is_refused(tmp_path: Path) -> None:
    tampered = tmp_path / "model.onnx"
    shutil.copyfile(default_model_path(), tampered)
    with tampered.open("r+b") as f:
        f.seek(-16, 2)
        last = f.read(16)
        f.seek(-16, 2)
        f.write(bytes(b ^ 0xFF for b in last))
    embedder = MiniLMEmbedder(model_path=tampered)
    with pytest.raises(EmbedderError) as caught:
        embedder.embed(["x"])
    message = str(caught.value)
    assert "sha256" in message
    assert MODEL_SHA256 in message
    assert str(tampered) in message
    # The unmodified copy at the same kind of path loads fine.
    intact = tmp_path / "intact.onnx"
    shutil.copyfile(default_model_path(), intact)
    assert MiniLMEmbedder(model_path=intact).embed(["x"])[0].dim == 384


def _rss_bytes() -> int:
    with open("/proc/self/status", encoding="ascii") as fh:
        return next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmRSS:"))


def test_a_batch_of_long_texts_leaves_no_buffers_behind(embedder: MiniLMEmbedder) -> None:
    """onnxruntime's CPU arena kept the largest buffers a batch ever needed for the process's life
    (a batch of 64 texts of 256 tokens: 1.7 GB); the embedder runs without it (ADR 0028)."""
    embedder.embed([CAT])
    before = _rss_bytes()
    long_texts = [f"{i} " + "memory " * 300 for i in range(32)]  # truncated at 256 tokens each
    vectors = embedder.embed(long_texts)
    after = _rss_bytes()
    assert len(vectors) == 32 and all(abs(_norm(v) - 1) < 1e-3 for v in vectors)
    assert after - before < 150 * 1024 * 1024, f"RSS grew by {(after - before) >> 20} MiB"


def test_embedders_with_equal_settings_share_one_loaded_model(tmp_path: Path) -> None:
    path = tmp_path / "model.onnx"
    shutil.copyfile(default_model_path(), path)
    first, second = MiniLMEmbedder(model_path=path), MiniLMEmbedder(model_path=path)
    assert first.embed([CAT])[0].data == second.embed([CAT])[0].data
    assert shared_model(ModelSettings(path=path)).session is first._load().session is second._load().session
    other_threads = MiniLMEmbedder(model_path=path, intra_op_threads=1)
    assert other_threads._load().session is not first._load().session


def test_a_load_started_in_the_background_is_the_one_the_embedder_uses(tmp_path: Path) -> None:
    path = tmp_path / "model.onnx"
    shutil.copyfile(default_model_path(), path)
    load_in_background(ModelSettings(path=path))
    load_in_background(ModelSettings(path=path))  # already loading: no second thread
    loading = [t for t in threading.enumerate() if t.name == "minilm-load"]
    assert len(loading) <= 1 and all(t.daemon for t in loading)
    embedder = MiniLMEmbedder(model_path=path)
    assert embedder.embed([CAT])[0].dim == 384
    assert embedder._load() is shared_model(ModelSettings(path=path))


def test_a_failed_background_load_is_reported_by_the_command_and_tried_again(tmp_path: Path) -> None:
    path = tmp_path / "model.onnx"
    load_in_background(ModelSettings(path=path))  # the file is not there yet: fails quietly
    for thread in [t for t in threading.enumerate() if t.name == "minilm-load"]:
        thread.join(timeout=60)
    with pytest.raises(EmbedderError, match="cannot read the MiniLM model"):
        MiniLMEmbedder(model_path=path).embed(["x"])
    shutil.copyfile(default_model_path(), path)  # the file is back: the failure was not kept
    assert MiniLMEmbedder(model_path=path).embed(["x"])[0].dim == 384


def test_the_process_keeps_few_loaded_models_while_embedders_keep_their_own(tmp_path: Path) -> None:
    embedders = []
    for n in range(KEPT_MODELS + 2):
        path = tmp_path / f"model-{n}.onnx"
        shutil.copyfile(default_model_path(), path)
        embedders.append(MiniLMEmbedder(model_path=path))
        assert embedders[-1].embed([CAT])[0].dim == 384
    kept = [s.path.name for s in minilm_model._models if s.path is not None and s.path.parent == tmp_path]
    assert kept == [f"model-{n}.onnx" for n in range(2, KEPT_MODELS + 2)]
    assert embedders[0].embed([CAT])[0].data == embedders[-1].embed([CAT])[0].data  # still its own


def test_idle_threads_wait_rather_than_spin(embedder: MiniLMEmbedder) -> None:
    """Spinning onnxruntime workers starve the other processes of a small machine (ADR 0080)."""
    embedder.embed(["load the model"])
    loaded = embedder._loaded
    assert loaded is not None
    assert loaded.session.get_session_options().get_session_config_entry(minilm_model.SPINNING) == "0"
