"""The committed checkpoints (make pretrain): the stored weights give the logged metrics, and the
start of each run, re-run here, gives the logged curve (bit for bit under the pinned kernels)."""

import dataclasses
import itertools
import json

import pytest
import torch

from bertfamily import kernels, tlm
from bertfamily.checkpoints import EXPERIMENTS, common
from bertfamily.checkpoints.common import read_log
from bertfamily.checkpoints.course import (
    COURSE,
    CourseSettings,
    course_data,
    course_model,
    learning_rate,
    load_course_model,
    train_course_model,
)
from bertfamily.checkpoints.course_distil import (
    COURSE_DISTIL,
    CourseDistilSettings,
    course_student,
    distil_course_model,
    load_course_student,
)
from bertfamily.checkpoints.course_scarce import COURSE_SCARCE, scarce_articles, scarce_data, train_scarce_run
from bertfamily.checkpoints.masking import MASKING, MaskingSettings, load_masking, masking_data, train_masking_run
from bertfamily.checkpoints.scores import blank_scores
from bertfamily.checkpoints.sharing import SHARING, SharingSettings, load_sharing, sharing_model, train_sharing_run
from bertfamily.checkpoints.showcases import SHOWCASE, ShowcaseSettings, showcase, showcase_guesses
from bertfamily.checkpoints.tlm import TLM, TlmSettings, content_accuracy, load_tlm, tlm_blanks, tlm_data, tlm_model
from bertfamily.pretraining import evaluate_mlm
from bertfamily.timing import threads
from tools import pretrain

#: Where bits cannot match (another CPU), a re-run is compared within this (nats / accuracy).
TOLERANCE = 0.05 if kernels.mode() == "tolerant" else 1e-6


@pytest.mark.parametrize("name", list(EXPERIMENTS))
def test_each_log_holds_its_experiments_settings(name):
    """A stored log's settings parse into its experiment's dataclass, equal the settings in the code, and
    are written back as the log holds them (lists, keys in the same order)."""
    experiment = EXPERIMENTS[name]
    logged = read_log(name)["settings"]
    assert type(experiment.settings).from_log(logged) == experiment.settings
    assert json.dumps(experiment.settings.to_log()) == json.dumps(logged)


def test_a_mistyped_setting_fails_when_the_log_is_read(tmp_path, monkeypatch):
    logged = MASKING.to_log()
    logged["setps"] = logged.pop("steps")
    with pytest.raises(ValueError, match=r"MaskingSettings .*unknown keys \['setps'\], missing keys \['steps'\]"):
        MaskingSettings.from_log(logged)
    monkeypatch.setattr(common, "FOLDER", tmp_path)
    (tmp_path / "masking.json").write_text(json.dumps({"settings": logged}), encoding="utf-8")
    with pytest.raises(ValueError, match="setps"):
        EXPERIMENTS["masking"].read()
    with pytest.raises(TypeError, match="setps"):
        MASKING.replace(setps=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        MASKING.steps = 1


@pytest.fixture(scope="module")
def masking():
    return masking_data(), read_log("masking")


@pytest.fixture(scope="module")
def lexicon():
    return tlm_data(), read_log("tlm")


def test_the_log_holds_every_run_and_its_settings(masking, lexicon):
    log = masking[1]
    assert MaskingSettings.from_log(log["settings"]) == MASKING and set(log["runs"]) == set(MASKING.schemes)
    assert all(len(runs) == len(MASKING.seeds) for runs in log["runs"].values())
    assert log["unigram"] == pytest.approx(masking[0].unigram, abs=1e-9)
    assert TlmSettings.from_log(lexicon[1]["settings"]) == TLM
    assert len(lexicon[1]["runs"]) == len(TLM.seeds) * len(TLM.objectives)


@pytest.mark.parametrize("scheme", MASKING.schemes)
def test_stored_masking_models_give_the_logged_metrics(masking, scheme):
    data, log = masking
    model = load_masking(data, scheme, seed=0)
    logged = log["runs"][scheme][0]
    assert evaluate_mlm(model, data.held_out)["loss"] == pytest.approx(logged["held"]["loss"], abs=1e-4)
    assert evaluate_mlm(model, data.new_mask)["loss"] == pytest.approx(logged["new"]["loss"], abs=1e-4)


#: Steps of a stored run that its reproduction test trains: the log keeps each run's first five losses
#: (those of the runs stored before the log had them were taken from a re-run of their first evaluation
#: interval whose evaluation equalled the log's, within 2e-6).
FIRST = 5


@pytest.mark.slow
@pytest.mark.parametrize("scheme", MASKING.schemes)
def test_a_masking_run_reproduces_its_first_steps(masking, scheme):
    data, log = masking
    with threads(log["machine"]["threads"]):  # as make pretrain trained it
        _, history, _ = train_masking_run(data, scheme, 0, FIRST)
    logged = log["runs"][scheme][0]
    assert len(logged["first_losses"]) == FIRST
    assert history.train_loss == pytest.approx(logged["first_losses"], abs=TOLERANCE)


def test_stored_tlm_models_give_the_logged_accuracy(lexicon):
    data, log = lexicon
    blanks = tlm.italian_blanks(*data.test, "with")
    content = torch.tensor([int(t) in data.content for t in blanks.target])
    for seed in TLM.stored_seeds:
        model = load_tlm(data, "tlm", seed)
        accuracy = float(tlm.blank_accuracy(model, blanks)[content].float().mean())
        assert accuracy == pytest.approx(log["runs"][f"tlm-{seed}"]["content_accuracy"]["with"], abs=1e-6)


def test_stored_alternating_models_give_the_logged_accuracy(lexicon):
    """XLM's MLM+TLM models, in every condition (lesson 6 reads all three)."""
    data, log = lexicon
    blanks, content = tlm_blanks(data)
    for seed in TLM.stored_seeds:
        measured = content_accuracy(load_tlm(data, tlm.ALTERNATING, seed), blanks, content)
        assert measured == pytest.approx(log["runs"][f"{tlm.ALTERNATING}-{seed}"]["content_accuracy"], abs=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("objective, seed", [("tlm", 0), (tlm.ALTERNATING, 1)])
def test_a_tlm_run_reproduces_its_first_losses(lexicon, objective, seed):
    data, log = lexicon
    s = TLM
    model = tlm_model(data, seed)
    with threads(1):  # train_models trains each model on one thread
        losses = tlm.train_pairs(
            model,
            *data.train,
            objective,
            steps=s.steps,
            batch_size=s.batch,
            probability=s.probability,
            generator=torch.Generator().manual_seed(seed),
            progress=False,
            until=101,
        )
    assert losses[::100] == pytest.approx(log["runs"][f"{objective}-{seed}"]["loss_curve"][:2], abs=TOLERANCE)


@pytest.fixture(scope="module")
def shared_runs(masking):
    return masking[0], read_log("sharing")


def test_the_sharing_log_holds_both_variants(shared_runs):
    data, log = shared_runs
    assert SharingSettings.from_log(log["settings"]) == SHARING and set(log["runs"]) == set(SHARING.variants)
    assert all(len(runs) == len(SHARING.seeds) for runs in log["runs"].values())
    assert log["unigram"] == pytest.approx(data.unigram, abs=1e-9)
    shared, own = log["runs"]["shared"][0]["parameters"], log["runs"]["unshared"][0]["parameters"]
    layer = (own - shared) // (SHARING.layers - 1)  # what each extra own layer stores
    assert own - shared == layer * (SHARING.layers - 1) and layer > 0


@pytest.mark.parametrize("variant", SHARING.variants)
def test_stored_sharing_models_give_the_logged_metrics(shared_runs, variant):
    data, log = shared_runs
    model = load_sharing(data, variant, seed=0)
    layers = model.bert.encoder.layer
    assert (layers[0] is layers[-1]) == (variant == "shared")
    logged = log["runs"][variant][0]
    assert sum(p.numel() for p in model.parameters()) == logged["parameters"]
    assert evaluate_mlm(model, data.held_out)["loss"] == pytest.approx(logged["held"]["loss"], abs=1e-4)


def test_share_layers_ties_every_layer_to_the_first(masking):
    data, _ = masking
    model = sharing_model(data, "shared")
    first = model.bert.encoder.layer[0]
    assert all(layer is first for layer in model.bert.encoder.layer)
    with pytest.raises(ValueError, match="variant must be one of"):
        sharing_model(data, "half")


@pytest.mark.slow
@pytest.mark.parametrize("variant", SHARING.variants)
def test_a_sharing_run_reproduces_its_first_steps(shared_runs, variant):
    data, log = shared_runs
    with threads(log["machine"]["threads"]):  # as make pretrain trained it
        _, history = train_sharing_run(data, variant, 0, FIRST)
    logged = log["runs"][variant][0]
    assert len(logged["first_losses"]) == FIRST
    assert history.train_loss == pytest.approx(logged["first_losses"], abs=TOLERANCE)


def test_sharing_runs_at_the_course_models_depth(shared_runs):
    # lesson 4 compares sharing at the depth of the course model, where sharing removes most layer weights
    data, log = shared_runs
    assert SHARING.layers == COURSE.layers >= 4
    model = load_sharing(data, "shared")
    assert len(model.bert.encoder.layer) == SHARING.layers
    assert len({id(layer) for layer in model.bert.encoder.layer}) == 1


# ------------------------------------------------------------------ the course model (lessons 1-4)

#: The course model and its students train with bfloat16 products on the machine's own kernels (AMX where it has
#: them); their first steps re-run here in float32, which moves a loss by at most a few hundredths of a nat.
COURSE_TOLERANCE = 0.05


@pytest.fixture(scope="module")
def course():
    return course_data(), read_log("course")


def test_the_course_log_describes_its_data_and_a_finished_run(course):
    data, log = course
    assert CourseSettings.from_log(log["settings"]) == COURSE
    assert log["steps_done"] == COURSE.steps == len(log["train_loss"])
    assert log["blanks"] == data.held_out.targets and log["vocab_size"] == data.small["vocab_size"]
    assert log["validation_blanks"] == data.validation.targets
    assert log["train_blocks"] == data.train.shape[0] and log["test_blocks"] == data.test.shape[0]
    final = log["final"]
    assert final["hidden"]["blanks"] + final["kept"]["blanks"] == data.held_out.targets
    # the curve is on the validation blanks, never on the test blanks
    assert all(e["hidden"]["blanks"] + e["kept"]["blanks"] == data.validation.targets for e in log["evaluations"])


def test_the_course_models_blocks_know_their_articles(course):
    data, _ = course
    assert data.test_articles.shape[0] == data.test.shape[0]
    assert data.validation_articles.shape[0] == data.validation.input_ids.shape[0]
    per_article = torch.bincount(data.test_articles)
    assert per_article.max() <= COURSE.test_blocks_per_article
    assert bool((data.test_articles[1:] >= data.test_articles[:-1]).all())  # in article order


# The stored course model and its students give the scores their logs hold: lesson 1 (cell c1facts0) and
# lesson 2 (cell cd1logck) score them anyway and check that, hidden, under nbval in every `make test`.


@pytest.mark.slow
def test_a_course_model_run_reproduces_its_first_steps(course):
    data, log = course
    fp32 = COURSE.replace(autocast=None)
    with threads(int(kernels.PINNED["OMP_NUM_THREADS"])):
        _, short = train_course_model(data, steps=2, settings=fp32, progress=False, evaluate=False)
    assert short["train_loss"] == pytest.approx(log["first_losses"][:2], abs=COURSE_TOLERANCE)


def test_the_learning_rate_warms_up_holds_and_decays():
    s = COURSE.replace(steps=100, warmup=10, decay=0.2, final_lr_fraction=0.1)
    rates = [learning_rate(step, s) for step in range(100)]
    assert rates[0] == pytest.approx(0.1) and rates[9] == pytest.approx(1.0)
    assert rates[9:80] == [1.0] * 71
    assert rates[99] == pytest.approx(0.1 + 0.9 / 20) and all(a >= b for a, b in itertools.pairwise(rates[80:]))


def test_blank_scores_split_hidden_from_kept_blanks(course):
    """A model that copies its input gets every kept blank and no hidden one."""
    from bertfamily.pretraining import HeldOut

    data, _ = course
    vocab = data.small["vocab_size"]

    class Copier(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = lambda input_ids: type(
                "Out", (), {"last_hidden_state": torch.nn.functional.one_hot(input_ids, vocab).float()}
            )()
            self.cls = torch.nn.Identity()

    held = HeldOut(data.held_out.input_ids[:40], data.held_out.labels[:40])
    scores = blank_scores(Copier(), held)
    assert scores["kept"]["top1"] == 1.0 and scores["hidden"]["top1"] < 0.01
    assert scores["hidden"]["blanks"] + scores["kept"]["blanks"] == held.targets


# ------------------------------------------------------------------ the course model distilled (lesson 2)


@pytest.fixture(scope="module")
def course_distil(course):
    return course[0], read_log("course-distil")


def test_the_course_distil_log_holds_every_arm(course_distil):
    data, log = course_distil
    assert CourseDistilSettings.from_log(log["settings"]) == COURSE_DISTIL
    assert log["blanks"] == data.held_out.targets
    runs = log["runs"]
    assert set(runs) == set(COURSE_DISTIL.arms)
    for arm in COURSE_DISTIL.arms:
        assert runs[arm]["steps_done"] == COURSE_DISTIL.steps == len(runs[arm]["train_loss"])
        assert runs[arm]["evaluations"][0]["step"] == 0  # where each student starts
    assert len({runs[arm]["parameters"] for arm in runs}) == 1
    assert runs["distilled"]["parameters"] < log["teacher"]["parameters"]
    assert log["teacher"]["hidden"]["top1"] == pytest.approx(read_log("course")["final"]["hidden"]["top1"])
    # the two arms from the teacher's layers start from the same scores; random init starts elsewhere
    start = {arm: runs[arm]["evaluations"][0]["hidden"]["top1"] for arm in runs}
    assert start["distilled"] == start["hard labels"] != start["random init"]


def test_the_students_start_from_the_teachers_layers_0_and_2_or_random_weights(course):
    data, _ = course
    teacher = load_course_model(data)
    for arm in ("distilled", "hard labels"):
        student = course_student(data, teacher, arm)
        assert len(student.bert.encoder.layer) == 2 and len(teacher.bert.encoder.layer) == 4
        kept = [teacher.bert.encoder.layer[i] for i in (0, 2)]
        for mine, theirs in zip(student.bert.encoder.layer, kept, strict=True):
            pairs = zip(mine.state_dict().values(), theirs.state_dict().values(), strict=True)
            assert all(torch.equal(a, b) for a, b in pairs)
    fresh = course_student(data, teacher, "random init")
    assert len(fresh.bert.encoder.layer) == 2
    ours, theirs = fresh.bert.encoder.layer[0], teacher.bert.encoder.layer[0]
    assert not torch.equal(ours.output.dense.weight, theirs.output.dense.weight)
    with pytest.raises(ValueError, match="arm must be one of"):
        load_course_student(data, "teacher")


@pytest.mark.slow
@pytest.mark.parametrize("arm", ["distilled"])  # the arm that runs the teacher too; the others share its code
def test_a_course_distillation_reproduces_its_first_steps(course_distil, arm):
    data, log = course_distil
    teacher = load_course_model(data)
    fp32 = COURSE_DISTIL.replace(autocast=None)
    with threads(int(kernels.PINNED["OMP_NUM_THREADS"])):
        _, short = distil_course_model(data, teacher, arm, steps=2, settings=fp32, progress=False, evaluate=False)
    assert short["train_loss"] == pytest.approx(log["runs"][arm]["first_losses"][:2], abs=COURSE_TOLERANCE)


# ------------------------------------------------------------------ distillation on 3% of the articles (lesson 2)


def test_the_scarce_share_is_a_fixed_draw_of_whole_articles(course):
    data, _ = course
    chosen = scarce_articles(data)
    assert len(chosen) == round(COURSE_SCARCE.fraction * data.articles)
    assert torch.equal(chosen, scarce_articles(data)) and torch.equal(chosen, chosen.unique())  # sorted, distinct
    scarce = scarce_data(data)
    assert scarce.articles == len(chosen) and scarce.validation is data.validation and scarce.held_out is data.held_out
    full = {tuple(row.tolist()) for row in data.train}
    assert 0 < scarce.train.shape[0] < data.train.shape[0] / 10
    assert all(tuple(row.tolist()) in full for row in scarce.train)  # training blocks, none made up
    assert torch.equal(scarce.counts, torch.bincount(scarce.train.flatten(), minlength=data.counts.numel()))
    with pytest.raises(ValueError, match="fraction must be"):
        scarce_articles(data, COURSE_SCARCE.replace(fraction=0))


@pytest.fixture(scope="module")
def course_scarce(course):
    return course[0], read_log("course-scarce")


def test_the_course_scarce_log_holds_finished_paired_runs(course_scarce):
    data, log = course_scarce
    s = COURSE_SCARCE
    assert log["settings"] == s.to_log()  # tuples stored as lists
    assert log["articles"] == scarce_articles(data).tolist() and log["train_articles"] == data.articles
    assert log["train_blocks"] == scarce_data(data).train.shape[0] and log["blanks"] == data.held_out.targets
    assert log["done"] == s.to_log()["jobs"][: len(log["done"])]  # in the order of the jobs, none skipped
    finished = {arm for arm, _ in log["done"]}
    assert {"hard labels", "distilled"} <= finished
    hidden = (data.held_out.input_ids != data.held_out.labels)[data.held_out.labels != -100]
    start = read_log("course-distil")["runs"]["distilled"]["evaluations"][0]
    for arm, seed in log["done"]:
        run = next(r for r in log["runs"][arm] if r["seed"] == seed)
        assert run["steps_done"] == s.steps == len(run["train_loss"])
        steps = [e["step"] for e in run["evaluations"]]
        assert steps == list(range(0, s.steps + 1, s.eval_every))
        for key in ("top1", "top5", "loss"):  # every arm starts from the teacher's layers 0 and 2
            assert run["evaluations"][0]["hidden"][key] == pytest.approx(start["hidden"][key], abs=1e-4)
        best = max(run["evaluations"][1:], key=lambda e: e["hidden"]["top1"])
        assert run["best_step"] == best["step"]
        for at in ("best", "last"):
            right = run[f"right_{at}"]
            assert len(right) == int(hidden.sum()) and set(right) <= {"0", "1"}
            assert right.count("1") / len(right) == pytest.approx(run[f"test_{at}"]["hidden"]["top1"], abs=1e-12)


@pytest.mark.slow
def test_a_scarce_run_reproduces_its_first_steps(course_scarce):
    data, log = course_scarce
    teacher = load_course_model(data)
    fp32 = COURSE_SCARCE.replace(autocast=None)
    arm, seed = log["done"][1]  # the distilled student: it runs the teacher too
    with threads(int(kernels.PINNED["OMP_NUM_THREADS"])):
        _, short, _ = train_scarce_run(
            scarce_data(data), teacher, arm, seed, steps=2, settings=fp32, progress=False, evaluate=False
        )
    run = next(r for r in log["runs"][arm] if r["seed"] == seed)
    assert short["train_loss"] == pytest.approx(run["first_losses"][:2], abs=COURSE_TOLERANCE)


def test_the_readmes_run_times_are_the_logs():
    """The README's table of how long `make pretrain` takes is read from the logs, not typed."""
    readme = (pretrain.ROOT / "README.md").read_text(encoding="utf-8")
    assert pretrain.readme_with_runtimes(readme) == readme, "run `python -m tools.pretrain --readme`"


@pytest.mark.parametrize(
    "argv", [["course", "--showcase-steps", "5"], ["--showcase-steps", "-1", "5"], ["--showcase-steps", "0"]]
)
def test_the_showcase_re_run_refuses_what_it_cannot_do(argv, capsys):
    with pytest.raises(SystemExit):
        pretrain.main(argv)
    assert "--showcase-steps" in capsys.readouterr().err


def test_the_showcase_re_run_answered_lesson_1s_blanks(course):
    """course-showcase.json (the course model's first steps again) holds the guesses at the very blanks
    that checkpoints.showcase picks, and its step-0 guesses are the untrained model's."""
    data, _ = course
    log = read_log("course-showcase")
    blanks = showcase(data)
    assert log["blanks"] == {k: [list(b) for b in v] for k, v in blanks.items()}
    assert log["steps"] == sorted(log["steps"]) and log["steps"][0] == 0
    assert CourseSettings.from_log(log["settings"]) == COURSE and ShowcaseSettings.from_log(log["showcase"]) == SHOWCASE
    assert all(len(g[name]) == len(blanks[name]) for g in log["guesses"] for name in blanks)
    fresh = showcase_guesses(course_model(data), data, {"hard": blanks["hard"][:2]})
    assert [w for w, _ in fresh["hard"][0]] == [w for w, _ in log["guesses"][0]["hard"][0]]


@pytest.mark.slow
def test_a_dry_run_writes_a_log_shaped_as_the_stored_one(capsys):
    """make pretrain's driver, lesson 4's experiment cut to two steps into a scratch folder (python -m
    tools.pretrain --dry-run goes through every experiment so, in minutes): its log has the stored log's keys
    at every depth, in order, and its settings; what is stored is not touched."""
    stored = (common.FOLDER / "sharing-shared-seed0.pt").read_bytes()
    lines = []
    assert pretrain.dry_run(["sharing"], lines.append) == []
    assert lines[-1] == "dry run of sharing: shaped as the stored log"
    assert (common.FOLDER / "sharing-shared-seed0.pt").read_bytes() == stored


def test_a_logs_shape_is_its_keys_in_order():
    assert pretrain.shape({"a": [{"b": 1, "c": [1.0]}], "d": "x"}) == [
        ("a", [[("b", None), ("c", "list")]]),
        ("d", None),
    ]
    assert pretrain.shape({"b": 1, "a": 2}) != pretrain.shape({"a": 2, "b": 1})


def test_threads_reach_both_the_pinned_and_the_native_runs(monkeypatch):
    """make pretrain runs the pinned experiments here and the native ones in a process of their own:
    --threads is passed to both (the pinned half used to drop it)."""
    assert EXPERIMENTS["course"].native and not EXPERIMENTS["masking"].native
    calls, real = [], pretrain.main
    monkeypatch.setattr(pretrain, "main", lambda argv=None: calls.append(("here", argv)) or 0)
    monkeypatch.setattr(pretrain.subprocess, "call", lambda command, cwd: calls.append(("process", command[3:])) or 0)
    assert real(["masking", "course", "--threads", "1"]) == 0
    assert calls == [("here", ["masking", "--threads", "1"]), ("process", ["--native", "course", "--threads", "1"])]
