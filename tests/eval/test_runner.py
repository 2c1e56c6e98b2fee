"""The runner: batched, resumable. A backend that crashes mid-run loses only the batch in flight, and
the rerun redoes no finished question."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from searchplay.config import Params
from searchplay.eval import runner
from searchplay.eval.benchmarks import QAItem
from searchplay.eval.runner import read_finished, run_benchmark

ITEMS = [QAItem(id=f"q{i}", question=f"What is {i}?", golden_answers=[str(i)], benchmark="nq") for i in range(10)]


class Crash(RuntimeError):
    pass


def scripted_solver(trajectory, asked, crash_after=None):
    """Stands in for the rollout: answers 'What is i?' with i; raises once ``crash_after`` questions were asked."""
    def solve(items, backend, search_tool, config, top_k, evidence=False):
        if crash_after is not None and len(asked) + len(items) > crash_after:
            raise Crash("backend died")
        asked.extend(item.id for item in items)
        return [trajectory(item.question.split()[-1].rstrip("?")) for item in items]
    return solve


def test_crash_then_resume_redoes_nothing(tmp_path, monkeypatch, fake_judge, fake_trajectory, fake_backend):
    path = tmp_path / "nq.jsonl"
    asked: list[str] = []
    monkeypatch.setattr(runner, "solve_batch", scripted_solver(fake_trajectory, asked, crash_after=7))
    kwargs = dict(backend=fake_backend, search_tool=None, judge=fake_judge, config=None, model="m", batch_size=3)
    with pytest.raises(Crash):
        run_benchmark(ITEMS, path, **kwargs)
    assert list(read_finished(path)) == ["q0", "q1", "q2", "q3", "q4", "q5"]  # two whole batches survived
    first_run, progress = list(asked), []
    monkeypatch.setattr(runner, "solve_batch", scripted_solver(fake_trajectory, asked))
    records = run_benchmark(ITEMS, path, on_batch=progress.append, **kwargs)
    assert asked[len(first_run):] == ["q6", "q7", "q8", "q9"]  # nothing asked twice
    assert progress == [6, 3, 1]  # the bar counts the answers it found, then each batch: it ends at its total
    assert [r["id"] for r in records] == [i.id for i in ITEMS] and all(r["judge_correct"] for r in records)


def test_a_changed_setting_rescores_and_an_unchanged_one_reuses(tmp_path, monkeypatch, fake_judge,
                                                                fake_trajectory, fake_backend):
    """Predictions carry the settings fingerprint (judge, decoding, metric options, model revision): a rerun
    under other settings redoes every question, a rerun under the same settings none."""
    path, asked = tmp_path / "nq.jsonl", []
    monkeypatch.setattr(runner, "solve_batch", scripted_solver(fake_trajectory, asked))
    kwargs = dict(backend=fake_backend, search_tool=None, judge=fake_judge, config=None, model="m", batch_size=4)
    run_benchmark(ITEMS[:4], path, settings="judge-a", **kwargs)
    run_benchmark(ITEMS[:4], path, settings="judge-a", **kwargs)
    assert len(asked) == 4
    records = run_benchmark(ITEMS[:4], path, settings="judge-b", **kwargs)
    assert len(asked) == 8 and {r["settings"] for r in records} == {"judge-b"}


@pytest.mark.parametrize("answered", [503, 200])
def test_a_judge_outage_is_never_a_final_verdict_a_rerun_asks_again(tmp_path, monkeypatch, fake_trajectory,
                                                                    fake_backend, answered):
    import httpx
    import respx

    from searchplay.eval.evaluate import check_judge_errors
    from searchplay.llm.judge import Judge, JudgeOutageError, OpenAIJudgeLLM

    url = "http://user:pw@judge.test/v1"
    path, asked = tmp_path / "nq.jsonl", []
    wrong = scripted_solver(lambda answer: fake_trajectory("not " + answer), asked)
    monkeypatch.setattr(runner, "solve_batch", wrong)
    judge = Judge(OpenAIJudgeLLM(url, "judge-model", max_retries=0, sleep=lambda s: None))
    kwargs = dict(backend=fake_backend, search_tool=None, judge=judge, config=None, model="m", batch_size=4)
    with respx.mock:
        respx.post(url + "/chat/completions").mock(return_value=httpx.Response(503))
        down = run_benchmark(ITEMS[:4], path, **kwargs)
    assert all(r["judge_error"] for r in down)
    with pytest.raises(JudgeOutageError, match=r"4 of 4 answers could not be judged by judge-model at "
                                               r"http://\*\*\*@judge.test"):
        check_judge_errors(judge, down, max_share=0.0)
    with respx.mock:
        route = respx.post(url + "/chat/completions").mock(return_value=httpx.Response(
            answered, json={"choices": [{"message": {"role": "assistant", "content": "Incorrect"}}]}))
        again = run_benchmark(ITEMS[:4], path, **kwargs)
    assert route.call_count == 4 and len(asked) == 8  # every unjudged answer is asked again
    assert all(r["judge_error"] for r in again) == (answered == 503)
    check_judge_errors(judge, down, max_share=1.0)  # a share the user allows passes


def test_settings_fingerprint_follows_what_changes_a_score():
    from searchplay.eval.evaluate import settings_fingerprint
    from searchplay.eval.runner import rollout_config

    params = Params()
    run = {"model": "m", "model_revision": "r1", "judge": "exact-match", "judge_prompt": "ssp",
           "normalization": "squad", "top_k": 3}
    base = settings_fingerprint(run, rollout_config(params), params)
    assert settings_fingerprint(dict(run), rollout_config(params), params) == base
    assert settings_fingerprint({**run, "model_revision": "r2"}, rollout_config(params), params) != base
    assert settings_fingerprint({**run, "normalization": "unicode"}, rollout_config(params), params) != base
    params.evaluate.max_turns = 3
    fewer_turns = settings_fingerprint(run, rollout_config(params), params)
    params.agent.max_turn_tokens = 64
    assert len({base, fewer_turns, settings_fingerprint(run, rollout_config(params), params)}) == 3
    params.evaluate.question_format = "plain"
    plain_question = settings_fingerprint(run, rollout_config(params), params)
    params.evaluate.final_answer_turn = True
    assert len({base, fewer_turns, plain_question, settings_fingerprint(run, rollout_config(params), params)}) == 4


def test_settings_fingerprint_follows_every_param_of_the_stage_and_the_index(tmp_path):
    """The predictions folder outlives a DVC re-run, which a changed dependency causes: each of them must change
    the fingerprint, or the re-run would keep answers given against the old index or settings."""
    from searchplay.eval.evaluate import settings_fingerprint
    from searchplay.eval.runner import rollout_config

    def fingerprint(**sections) -> str:
        params = Params.model_validate({"index": {"dir": str(tmp_path / "index")}, **sections})
        return settings_fingerprint({"model": "m", "model_revision": "r1"}, rollout_config(params), params)

    models = {"embedder_dtype": "float32", "dtype": "bfloat16"}  # every models.* key the stages list but the policy
    stages = yaml.safe_load((Path(__file__).parents[2] / "dvc.yaml").read_text())["stages"]
    listed = {key.removeprefix("models.") for name in ("evaluate", "evaluate_reference")
              for key in stages[name]["do"]["params"] if key.startswith("models.")}
    assert listed == {*models, "policy"}  # the policy is the run's model, fingerprinted above
    base = fingerprint()
    changed = [fingerprint(search={"rrf_k": 10}), fingerprint(search={"hybrid_candidates": 7}),
               fingerprint(agent={"backend": "vllm"}), fingerprint(judge={"endpoint": "http://judge.test/v1"}),
               *(fingerprint(models={key: value}) for key, value in models.items()),
               fingerprint(evaluate={"batch_size": 3}),
               fingerprint(index={"dir": str(tmp_path / "index"), "nprobes": 3}),
               fingerprint(index={"dir": str(tmp_path / "index"), "refine_factor": 0})]
    assert base not in changed and len(set(changed)) == len(changed)
    assert fingerprint(evaluate={"n": 9, "seed": 3, "benchmarks": ["nq"]}) == base  # which questions: per record
    (tmp_path / "index.fingerprint.json").write_text('{"content": "a"}')
    rebuilt = fingerprint()
    (tmp_path / "index.fingerprint.json").write_text('{"content": "b"}')
    assert len({base, rebuilt, fingerprint()}) == 3


def test_a_saved_answer_to_a_changed_question_or_gold_is_asked_again(tmp_path, monkeypatch, fake_judge,
                                                                    fake_trajectory, fake_backend):
    """Records are matched by id, and a regenerated KG pool can keep an id and change the gold answer."""
    path, asked = tmp_path / "nq.jsonl", []
    monkeypatch.setattr(runner, "solve_batch", scripted_solver(fake_trajectory, asked))
    kwargs = dict(backend=fake_backend, search_tool=None, judge=fake_judge, config=None, model="m", batch_size=4)
    run_benchmark(ITEMS[:3], path, **kwargs)
    changed = [ITEMS[0], QAItem(id="q1", question="What is 1?", golden_answers=["one"], benchmark="nq"),
               QAItem(id="q2", question="What is two?", golden_answers=["2"], benchmark="nq")]
    records = run_benchmark(changed, path, **kwargs)
    assert asked == ["q0", "q1", "q2", "q1", "q2"] and [r["golden_answers"] for r in records] == [["0"], ["one"], ["2"]]


def test_settings_fingerprint_follows_the_packages_code(monkeypatch):
    """A resumed evaluation never keeps answers that other code gave (the resume log persists under DVC)."""
    from searchplay.eval import evaluate
    from searchplay.eval.runner import rollout_config

    params = Params()
    run = {"model": "m", "model_revision": "r1"}
    before = evaluate.settings_fingerprint(run, rollout_config(params), params)
    monkeypatch.setattr(evaluate, "code_digest", lambda: "an edited rollout.py")
    assert evaluate.settings_fingerprint(run, rollout_config(params), params) != before


def test_evaluation_protocol_comes_from_the_evaluate_section_not_the_agent_one():
    from searchplay.eval.runner import rollout_config

    params = Params.model_validate({"agent": {"question_format": "plain", "information_format": "ssp"},
                                   "evaluate": {"eos_without_action": "correct", "final_answer_turn": True,
                                                "information_format": "searchr1"}})
    config = rollout_config(params)
    assert (config.eos_without_action, config.final_answer_turn, config.information_format,
            config.question_format) == ("correct", True, "searchr1", "searchr1")  # evaluate's own default
    assert Params().agent.question_format == "plain"  # self-play keeps the SSP code's training prompt


def test_solver_prompt_follows_the_configured_question_format(smollm2_path):
    from searchplay.agent.rollout import RolloutConfig
    from searchplay.llm.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(str(smollm2_path))
    seen = []

    class Recorder:
        def __init__(self):
            self.tokenizer = tokenizer

        def generate(self, prompts, sampling):
            seen.extend(tokenizer.decode(p) for p in prompts)
            raise Crash("enough")

    for style in ("searchr1", "plain"):
        with pytest.raises(Crash):
            runner.solve_batch(ITEMS[:1], Recorder(), None, RolloutConfig(question_format=style), top_k=3)
    question = ITEMS[0].question.strip().rstrip("?")
    assert f"Question: {question}?\n<|im_end|>" in seen[0]
    assert f"Question: {ITEMS[0].question.strip()}<|im_end|>" in seen[1]


def test_records_keep_the_full_output_beside_the_answer(tmp_path, monkeypatch, fake_judge, fake_trajectory,
                                                       fake_backend):
    monkeypatch.setattr(runner, "solve_batch", scripted_solver(fake_trajectory, []))
    records = run_benchmark(ITEMS[:2], tmp_path / "nq.jsonl", backend=fake_backend, search_tool=None,
                            judge=fake_judge, config=None, model="bundled:smollm2", model_revision="abc",
                            batch_size=2)
    assert records[1]["prediction"] == "1"
    assert records[1]["output"] == "<search>q</search><information>doc</information><answer>1"
    assert records[1]["model"] == "bundled:smollm2" and records[1]["model_revision"] == "abc"
    assert read_finished(tmp_path / "nq.jsonl")["q1"]["output"] == records[1]["output"]


def test_torn_last_line_is_dropped_and_redone(tmp_path, monkeypatch):
    path = tmp_path / "nq.jsonl"
    good = {"id": "q0", "model": "m", "judge_correct": True}
    path.write_text(json.dumps(good) + "\n" + '{"id": "q1", "mod')
    assert list(read_finished(path)) == ["q0"]
    assert path.read_text() == json.dumps(good) + "\n"


def test_damaged_middle_line_is_a_clear_error(tmp_path):
    path = tmp_path / "nq.jsonl"
    path.write_text('{"id": "q0"}\n{oops\n{"id": "q2"}\n')
    with pytest.raises(ValueError, match=r"nq.jsonl:2: .*delete it"):
        read_finished(path)


def test_timed_search_tool_accumulates_retrieval_time():
    times = runner.StageTimes()

    class Tool:
        def search(self, queries, top_k=3):
            return [[] for _ in queries]

    assert runner.TimedSearchTool(Tool(), times).search(["a"], top_k=3) == [[]]
    assert times.retrieval > 0


@pytest.mark.slow
def test_resume_with_real_rollout_and_fake_backend(tmp_path, smollm2_path, fake_judge):
    """The real agent protocol (prompt, run_rollouts) over a scripted backend that dies on its 3rd call."""
    rollout = pytest.importorskip("searchplay.agent.rollout")
    from searchplay.llm.backend import Completion
    from searchplay.llm.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(str(smollm2_path))

    class ScriptedBackend:
        def __init__(self, die_on_call=None):
            self.tokenizer, self.calls, self.die_on_call = tokenizer, 0, die_on_call

        def generate(self, prompts, sampling):
            self.calls += 1
            if self.calls == self.die_on_call:
                raise Crash("generation failed")
            text = "<think>easy</think><answer>42</answer>"
            ids = tokenizer(text, add_special_tokens=False)["input_ids"]
            return [Completion(token_ids=list(ids), text=text, finish_reason="stop", stop="</answer>") for _ in prompts]

        def update_weights(self, model):
            pass

    class NoSearch:
        def search(self, queries, top_k=3):
            return [[] for _ in queries]

    config = runner.rollout_config(Params())
    path = tmp_path / "nq.jsonl"
    items = ITEMS[:6]
    kwargs = dict(search_tool=NoSearch(), judge=fake_judge, config=config, model="m", batch_size=2)
    with pytest.raises(Crash):
        run_benchmark(items, path, backend=ScriptedBackend(die_on_call=3), **kwargs)
    assert list(read_finished(path)) == ["q0", "q1", "q2", "q3"]
    backend = ScriptedBackend()
    records = run_benchmark(items, path, backend=backend, **kwargs)
    assert backend.calls == 1  # only the last batch of two questions was generated again
    assert [r["prediction"] for r in records] == ["42"] * 6
    assert all("<think>easy</think><answer>42</answer>" in r["output"] for r in records)
    assert rollout is not None


def test_batches_span_benchmarks_and_each_file_gets_its_own_records(tmp_path, monkeypatch, fake_judge,
                                                                     fake_trajectory, fake_backend):
    """Seven 5-question benchmarks decode in batches of ``batch_size``, not of 5; every record lands in its
    benchmark's file, in item order."""
    from searchplay.eval.runner import run_benchmarks

    batches: list[list[str]] = []
    solve = scripted_solver(fake_trajectory, [])
    monkeypatch.setattr(runner, "solve_batch", lambda items, *rest: batches.append([i.id for i in items])
                        or solve(items, *rest))
    other = [QAItem(id=f"t{i}", question=f"What is {i}?", golden_answers=[str(i)], benchmark="triviaqa")
             for i in range(3)]
    work = {tmp_path / "nq.jsonl": ITEMS[:3], tmp_path / "triviaqa.jsonl": other}
    records = run_benchmarks(work, backend=fake_backend, search_tool=None, judge=fake_judge, config=None, model="m",
                             batch_size=4)
    assert batches == [["q0", "q1", "q2", "t0"], ["t1", "t2"]]
    assert list(read_finished(tmp_path / "nq.jsonl")) == ["q0", "q1", "q2"]
    assert list(read_finished(tmp_path / "triviaqa.jsonl")) == ["t0", "t1", "t2"]
    assert [r["id"] for r in records[tmp_path / "triviaqa.jsonl"]] == ["t0", "t1", "t2"]


@pytest.mark.slow
def test_evidence_mode_asks_for_evidence_and_scores_presence_support_and_joint(tmp_path, smollm2_path):
    """``evaluate.evidence``: the EVE Solver prompt, and EVE's evidence metrics from the exact-match judge."""
    from searchplay.eval.scoring import benchmark_scores
    from searchplay.llm.backend import Completion
    from searchplay.llm.judge import Judge
    from searchplay.llm.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(str(smollm2_path))
    replies = ["<evidence>The answer is 42 of course.</evidence><answer>42</answer>",  # right, supported
               "<evidence>Nothing useful here.</evidence><answer>42</answer>",  # right, unsupported
               "<answer>7</answer>"]  # wrong, no evidence

    class EvidenceBackend:
        def __init__(self):
            self.tokenizer, self.prompts = tokenizer, []

        def generate(self, prompts, sampling):
            self.prompts += [tokenizer.decode(p) for p in prompts]
            texts = [replies[k % 3] for k in range(len(prompts))]
            return [Completion(list(tokenizer(t, add_special_tokens=False)["input_ids"]), t, "stop", "</answer>")
                    for t in texts]

        def update_weights(self, model):
            pass

    backend = EvidenceBackend()
    items = [QAItem(id=f"q{k}", question=f"question {k}?", golden_answers=["42"], benchmark="nq") for k in range(3)]
    records = run_benchmark(items, tmp_path / "nq.jsonl", backend=backend, search_tool=None, judge=Judge(),
                            config=runner.rollout_config(Params()), model="m", batch_size=3, evidence=True)
    assert all("<evidence>" in prompt for prompt in backend.prompts)
    assert [r["evidence_present"] for r in records] == [True, True, False]
    assert [r["evidence_supported"] for r in records] == [True, False, False]
    assert [r["joint_correct"] for r in records] == [True, False, False]
    scores = benchmark_scores(records)
    assert scores["evidence_presence"] == pytest.approx(200 / 3) and scores["joint_acc"] == pytest.approx(100 / 3)
    plain = run_benchmark(items, tmp_path / "plain.jsonl", backend=EvidenceBackend(), search_tool=None, judge=Judge(),
                          config=runner.rollout_config(Params()), model="m", batch_size=3)
    assert "evidence_present" not in plain[0] and "evidence_presence" not in benchmark_scores(plain)


def test_records_say_whether_the_searches_retrieved_a_gold_answer(tmp_path, monkeypatch, fake_judge,
                                                                   fake_trajectory, fake_backend):
    from types import SimpleNamespace

    from searchplay.retrieval.types import Document

    def with_documents(answer):
        trajectory = fake_trajectory(answer)
        text = "Three is a number." if answer == "3" else "Nothing here."
        trajectory.turns = [SimpleNamespace(documents=[Document("1", "Numbers", text)]), SimpleNamespace(documents=[])]
        return trajectory

    monkeypatch.setattr(runner, "solve_batch", scripted_solver(with_documents, []))
    items = [QAItem("a", "What is 3?", ["three"], "nq"), QAItem("b", "What is 4?", ["four"], "nq")]
    records = run_benchmark(items, tmp_path / "nq.jsonl", backend=fake_backend, search_tool=None,
                            judge=fake_judge, config=None, model="bundled:smollm2", batch_size=2)
    assert [r["answer_retrieved"] for r in records] == [True, False]


def test_evaluation_turns_override_the_agents_only_where_set():
    from searchplay.config import Params
    from searchplay.eval.runner import evaluation_turns, rollout_config

    params = Params.model_validate({"agent": {"max_turns": 4}})
    assert evaluation_turns(params) == 4 and rollout_config(params).max_turns == 4  # one source: agent.max_turns
    params.evaluate.max_turns = 10
    assert evaluation_turns(params) == 10 and rollout_config(params).max_turns == 10
