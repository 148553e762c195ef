"""bertfamily.distillation: temperature, the distillation losses, students built from a teacher."""

import math

import pytest
import torch
import transformers

from bertfamily import distillation as D
from bertfamily import heads, losses
from bertfamily.features import mean_pool

FIGURE = torch.tensor([5.0, 2.0, 0.5, 0.5, -0.4], dtype=torch.float64)


def test_lesson_figure_numbers():
    p1, p3 = losses.soften(FIGURE, 1), losses.soften(FIGURE, 3)
    assert round(float(losses.non_target_mass(p1)), 3) == 0.071
    assert round(float(losses.non_target_mass(p3)), 3) == 0.495
    assert round(float(losses.entropy(p1)), 2) == 0.33
    assert round(float(losses.entropy(p3)), 2) == 1.36
    assert torch.equal(p1.argsort(), p3.argsort())  # temperature keeps the order


def test_temperature_limits():
    z = torch.randn(4, 7, generator=torch.Generator().manual_seed(0))
    assert torch.allclose(losses.soften(z, 1), torch.softmax(z, -1))
    assert torch.allclose(losses.entropy(losses.soften(z, 1e4)), torch.full((4,), math.log(7)), atol=1e-4)
    assert torch.all(losses.entropy(losses.soften(z, 3)) > losses.entropy(losses.soften(z, 1)))
    target = torch.tensor([0, 1, 2, 3])
    p = losses.soften(z, 1)
    assert torch.allclose(losses.non_target_mass(p, target), 1 - p[torch.arange(4), target])


@pytest.mark.parametrize("T", [0, -1, float("nan"), float("inf"), True])
def test_bad_temperature(T):
    with pytest.raises(ValueError, match="temperature"):
        losses.soften(FIGURE, T)
    with pytest.raises(ValueError, match="temperature"):
        losses.distillation_loss(FIGURE[None], FIGURE[None], T)


def test_distillation_loss_is_t2_kl_and_zero_at_match():
    g = torch.Generator().manual_seed(1)
    s, t = torch.randn(8, 5, generator=g), torch.randn(8, 5, generator=g)
    T = 3.0
    p, q = torch.softmax(t / T, -1), torch.softmax(s / T, -1)
    kl = (p * (p.log() - q.log())).sum(-1).mean()
    assert torch.allclose(losses.distillation_loss(s, t, T), kl * T * T, atol=1e-6)
    assert float(losses.distillation_loss(t, t, T)) == pytest.approx(0, abs=1e-6)
    s.requires_grad_()
    t.requires_grad_()
    losses.distillation_loss(s, t, T).backward()
    assert t.grad is None and s.grad is not None  # the teacher is a constant


def test_t2_keeps_gradient_size():
    g = torch.Generator().manual_seed(2)
    t = torch.randn(256, 10, generator=g) * 3
    s0 = torch.randn(256, 10, generator=g)
    norms = {}
    for T in (2.0, 8.0):
        s = s0.clone().requires_grad_()
        losses.distillation_loss(s, t, T).backward()
        norms[T] = float(s.grad.norm())
    # without T**2 the ratio would be about (8/2)**2 = 16; with it the sizes stay comparable
    assert 0.2 < norms[8.0] / norms[2.0] < 5


def test_shape_mismatch():
    with pytest.raises(ValueError, match="shapes must match"):
        losses.distillation_loss(torch.zeros(2, 5), torch.zeros(2, 4))
    with pytest.raises(ValueError, match="shapes must match"):
        losses.cosine_loss(torch.zeros(2, 3, 8), torch.zeros(2, 3, 4))
    with pytest.raises(ValueError, match="attention_mask"):
        losses.cosine_loss(torch.ones(2, 3, 4), torch.ones(2, 3, 4), torch.ones(2, 4))


def test_cosine_loss_and_mask():
    a = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(3))
    assert float(losses.cosine_loss(a, 2 * a)) == pytest.approx(0, abs=1e-6)
    assert float(losses.cosine_loss(a, -a)) == pytest.approx(2, abs=1e-6)
    b = a.clone()
    b[:, 2] = -b[:, 2]  # only the masked-out position disagrees
    mask = torch.tensor([[1, 1, 0], [1, 1, 0]])
    assert float(losses.cosine_loss(a, b, mask)) == pytest.approx(0, abs=1e-6)
    assert float(losses.cosine_loss(a, b)) > 0.5


def test_triple_loss_weights():
    g = torch.Generator().manual_seed(4)
    s, t = torch.randn(6, 5, generator=g), torch.randn(6, 5, generator=g)
    hs, ht = torch.randn(6, 8, generator=g), torch.randn(6, 8, generator=g)
    y = torch.randint(0, 5, (6,), generator=g)
    total, parts = losses.triple_loss(s, t, y, hs, ht, temperature=2.0, alpha_ce=5, alpha_task=2, alpha_cos=1)
    expected = 5 * parts["ce"] + 2 * parts["task"] + parts["cos"]
    assert float(total) == pytest.approx(expected, rel=1e-5)
    assert parts["ce"] == pytest.approx(float(losses.distillation_loss(s, t, 2.0)), rel=1e-5)
    only_cos, parts = losses.triple_loss(s, t, y, hs, ht, alpha_ce=0, alpha_task=0, alpha_cos=1)
    assert set(parts) == {"cos"}
    with pytest.raises(ValueError, match="all zero"):
        losses.triple_loss(s, t, y, hs, ht, alpha_ce=0, alpha_task=0, alpha_cos=0)
    with pytest.raises(ValueError, match="non-negative"):
        losses.triple_loss(s, t, y, hs, ht, alpha_ce=-1)
    with pytest.raises(ValueError, match="labels"):
        losses.triple_loss(s, t, y[:3], hs, ht)


@pytest.fixture
def tiny_bert(tiny_config):
    """A tiny BertModel with ``layers`` layers (tests/conftest.py's tiny size), seeded."""

    def build(layers=4):
        torch.manual_seed(0)
        return transformers.BertModel(tiny_config(num_hidden_layers=layers, max_position_embeddings=32)).eval()

    return build


def test_student_from_teacher_keeps_every_other_layer(tiny_bert):
    teacher = tiny_bert(4)
    student = D.student_from_teacher(teacher)
    assert student.config.num_hidden_layers == 2 and len(student.encoder.layer) == 2
    assert teacher.config.num_hidden_layers == 4 and len(teacher.encoder.layer) == 4
    for new, old in zip(student.encoder.layer, (teacher.encoder.layer[0], teacher.encoder.layer[2]), strict=True):
        for a, b in zip(new.parameters(), old.parameters(), strict=True):
            assert torch.equal(a, b) and a.data_ptr() != b.data_ptr()  # a copy, not shared
    ids = torch.randint(0, 50, (2, 7), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():  # the student's forward is the teacher's layers 0 and 2 in a row
        x = teacher.embeddings(input_ids=ids)
        for i in (0, 2):
            out = teacher.encoder.layer[i](x)
            x = out[0] if isinstance(out, tuple) else out
        assert torch.allclose(student(ids).last_hidden_state, x, atol=1e-5)
    assert D.student_from_teacher(teacher, [3]).config.num_hidden_layers == 1


@pytest.mark.parametrize("layers", [[], [4], [-1], [1, 1]])
def test_student_bad_layers(layers, tiny_bert):
    with pytest.raises(ValueError):
        D.student_from_teacher(tiny_bert(4), layers)


def test_student_needs_a_bert():
    with pytest.raises(ValueError, match="encoder.layer"):
        D.student_from_teacher(torch.nn.Linear(3, 3))


def test_students_learn_and_check_inputs():
    g = torch.Generator().manual_seed(6)
    x = torch.randn(120, 6, generator=g)
    y = (x[:, 0] > 0).long()
    torch.manual_seed(0)
    head = heads.train_linear_head(x, y, 2, epochs=100, lr=0.05)
    assert D.accuracy(head(x), y) > 0.9
    torch.manual_seed(0)
    student = heads.train_classifier(
        torch.nn.Linear(6, 2), [x], losses.soften(head(x).detach(), 2.0), epochs=30, lr=0.05, temperature=2.0
    )
    assert D.accuracy(student(x), y) > 0.9
    ids = torch.randint(1, 40, (60, 9), generator=g)
    yb = (ids[:, 0] < 20).long()
    bag = heads.train_classifier(heads.BagOfEmbeddings(40, 2, dim=8), [ids], yb, epochs=60, lr=0.05)
    assert D.accuracy(bag(ids), yb) > 0.6
    with pytest.raises(ValueError, match="probability rows"):
        heads.train_classifier(torch.nn.Linear(6, 2), [x], torch.full((120, 2), 0.7))
    with pytest.raises(ValueError, match="hard targets"):
        heads.train_classifier(torch.nn.Linear(6, 2), [x], y[:10])
    with pytest.raises(ValueError, match="num_classes"):
        heads.BagOfEmbeddings(40, 1)
    assert torch.get_num_threads() >= 1


def test_mean_std_and_pool():
    assert D.mean_std([1.0, 3.0]) == (2.0, pytest.approx(math.sqrt(2)))
    with pytest.raises(ValueError):
        D.mean_std([])
    h = torch.arange(12.0).reshape(1, 3, 4)
    assert torch.allclose(mean_pool(h, torch.tensor([[1, 1, 0]])), h[0, :2].mean(0))


def test_encoder_pass_is_cached():
    from bertfamily import features, models

    tokenizer = models.minilm_tokenizer()
    config = transformers.BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
    )
    torch.manual_seed(0)
    model = transformers.BertModel(config).eval()
    texts = ["the cat sat on the mat", "a dog"]
    first = features.encode(model, tokenizer, texts, max_length=8, progress=False)
    assert first.pooled.shape == (2, 16) and first.input_ids.shape[1] <= 8
    assert features.encode(model, tokenizer, texts, max_length=8, progress=False) is first
    wide = features.encode(model, tokenizer, texts, max_length=8, keep_hidden=True, progress=False)
    assert wide.hidden.shape[:2] == wide.input_ids.shape
    assert torch.allclose(mean_pool(wide.hidden, wide.attention_mask), first.pooled, atol=1e-6)
    with pytest.raises(ValueError, match="max_length"):
        features.encode(model, tokenizer, texts, max_length=1)
    with pytest.raises(ValueError, match="non-empty"):
        features.encode(model, tokenizer, "one string")


# ----------------------------------------------------------------- DistilBERT's recipe, tiny


def tiny_transfer_set(n=24, length=6, classes=3):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(1, 50, (n, length), generator=g)
    mask = torch.ones_like(ids)
    mask[::3, -2:] = 0  # some padding
    return ids, mask, torch.randn(n, classes, generator=g) * 3, torch.randn(n, 16, generator=g)


def _tiny_mlm(tiny_config, layers, seed):
    torch.manual_seed(seed)
    return transformers.BertForMaskedLM(tiny_config(num_hidden_layers=layers, max_position_embeddings=32))


def test_mlm_triple_loss_is_the_mlm_loss_alone_and_zero_on_a_copy(tiny_config):
    from bertfamily.pretraining import masked_lm_loss

    teacher, student = _tiny_mlm(tiny_config, 2, 0).eval(), _tiny_mlm(tiny_config, 1, 1).eval()
    ids = torch.randint(5, 50, (4, 12), generator=torch.Generator().manual_seed(0))
    labels = torch.full_like(ids, -100)
    labels[:, ::3] = ids[:, ::3]
    only_mlm = D.mlm_triple_loss(teacher, alpha_ce=0.0, alpha_cos=0.0)
    total, parts = only_mlm(student, ids, labels)
    assert set(parts) == {"task"} and torch.allclose(total, 2.0 * masked_lm_loss(student, ids, labels)[0])
    copy = D.student_from_teacher(teacher, [0, 1]).eval()  # the teacher itself: nothing to distil
    total, parts = D.mlm_triple_loss(teacher)(copy, ids, labels)
    assert parts["ce"] == pytest.approx(0, abs=1e-6) and parts["cos"] == pytest.approx(0, abs=1e-6)
    assert total.item() == pytest.approx(2.0 * parts["task"], rel=1e-5)
    with pytest.raises(ValueError, match="BertForMaskedLM"):
        D.mlm_triple_loss(teacher.bert)
    with pytest.raises(ValueError, match="alpha_ce"):
        D.mlm_triple_loss(teacher, alpha_ce=-1.0)
    with pytest.raises(ValueError, match="temperature"):
        D.mlm_triple_loss(teacher, temperature=0)


@pytest.mark.parametrize("T", [0.01, 1.0, 2.0, 100.0])
def test_first_guess_puts_all_the_mass_on_the_top_class(T):
    logits = torch.tensor([[0.5, 3.0, -1.0, 2.9], [7.0, 0.0, 0.0, 6.5]])
    hard = D.first_guess(logits)
    assert torch.equal(losses.soften(hard, T), torch.eye(4)[[1, 0]])
    assert torch.equal(hard.argmax(-1), logits.argmax(-1))


def test_mlm_triple_loss_with_first_guesses_is_cross_entropy_against_the_teachers_top_word(tiny_config):
    teacher, student = _tiny_mlm(tiny_config, 2, 0).eval(), _tiny_mlm(tiny_config, 1, 1).eval()
    ids = torch.randint(5, 50, (4, 12), generator=torch.Generator().manual_seed(0))
    labels = torch.full_like(ids, -100)
    labels[:, ::3] = ids[:, ::3]
    chosen = labels != -100
    with torch.no_grad():
        guesses = teacher(input_ids=ids).logits[chosen].argmax(-1)
        by_hand = 4.0 * torch.nn.functional.cross_entropy(student(input_ids=ids).logits[chosen] / 2.0, guesses)
    _, parts = D.mlm_triple_loss(teacher, targets="first guess")(student, ids, labels)
    _, soft = D.mlm_triple_loss(teacher)(student, ids, labels)
    assert parts["ce"] == pytest.approx(by_hand.item(), rel=1e-5)
    assert parts["ce"] > soft["ce"]  # the guess is further from the student than the whole distribution
    assert parts["task"] == soft["task"] and parts["cos"] == soft["cos"]  # the other terms are unchanged
    with pytest.raises(ValueError, match="targets must be"):
        D.mlm_triple_loss(teacher, targets="hard")


def test_distilling_a_masked_lm_moves_the_student_towards_its_teacher(tiny_config):
    from bertfamily.masking import DynamicMasking
    from bertfamily.pretraining import train_mlm

    teacher = _tiny_mlm(tiny_config, 2, 0).eval()
    ids = torch.randint(5, 50, (64, 12), generator=torch.Generator().manual_seed(1))
    probe = DynamicMasking(
        ids,
        vocab_size=teacher.config.vocab_size,
        mask_token_id=4,
        special_ids=[0, 1, 2, 3, 4],
        generator=torch.Generator().manual_seed(2),
    )(torch.arange(64), 0)

    def gap(student):  # the soft-target loss to the teacher on fixed masked inputs
        with torch.no_grad():
            return D.mlm_triple_loss(teacher, alpha_mlm=0.0, alpha_cos=0.0)(student.eval(), *probe)[1]["ce"]

    student = _tiny_mlm(tiny_config, 1, 3)
    before = gap(student)
    masking = DynamicMasking(
        ids,
        vocab_size=teacher.config.vocab_size,
        mask_token_id=4,
        special_ids=[0, 1, 2, 3, 4],
        generator=torch.Generator().manual_seed(4),
    )
    history = train_mlm(
        student,
        masking,
        steps=40,
        batch_size=16,
        lr=3e-3,
        progress=False,
        loss=D.mlm_triple_loss(teacher, alpha_mlm=0.0, alpha_cos=0.0),
    )
    assert gap(student) < 0.5 * before and history.train_loss[-1] < history.train_loss[0]
