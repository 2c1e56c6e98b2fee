"""One kg_wcr self-play iteration, run as one process or under ``torchrun`` with two CPU processes (gloo).

The policy is the scripted test backend made independent of call order (a rollout's reply depends only on
its prompt and on which copy of that prompt it is in the batch), so one process and two give the same
rollouts; the trainer is the real PolicyTrainer on the tiny model. The main process saves the updated
weights and the history; every process records how many prompts its backend generated for. Used by
test_distributed.py.

    python two_process_selfplay.py MODEL_DIR RUN_DIR OUT_DIR
    torchrun --nproc_per_node 2 two_process_selfplay.py MODEL_DIR RUN_DIR OUT_DIR
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: `tests` is a package

from tests.selfplay.selfplay_fakes import ScriptedBackend


class OrderFreeBackend(ScriptedBackend):
    """``ScriptedBackend`` whose Solver counter is the copy number of the prompt within the call."""

    prompts_seen = 0

    def generate(self, prompts, sampling):
        OrderFreeBackend.prompts_seen += len(prompts)
        copies: Counter = Counter()
        completions = []
        for prompt in prompts:
            key = tuple(prompt)
            self.solver_count = copies[key]  # _solve increments it first: copy j is correct when (j+1) % 3 == 0
            copies[key] += 1
            completions.append(self._complete(self.tokenizer.decode(list(prompt)), sampling))
        return completions


def main(model_dir: str, run_dir: str, out_dir: str) -> None:
    import torch

    from searchplay.llm.tokenizer import load_tokenizer
    from searchplay.rl import PolicyTrainer
    from searchplay.selfplay.distributed import Processes, sharded, sharded_judge
    from searchplay.selfplay.loop import run_selfplay
    from tests.selfplay.conftest import make_params, make_runtime

    torch.set_num_threads(1)
    torch.manual_seed(0)
    run, out = Path(run_dir), Path(out_dir)
    os.chdir(run)  # MLflow artifacts (./mlruns) stay in the run folder
    params = make_params(run, Path(model_dir), batch_size=2)
    records = [json.loads(line) for line in (run / "kg" / "subgraphs.jsonl").read_text().splitlines()]
    backend = OrderFreeBackend(load_tokenizer(model_dir), [r["answer"] for r in records],
                               {r["answer"]: r["waypoints"] for r in records})
    trainer = PolicyTrainer(params.models.policy, params)
    processes = Processes.from_accelerator(trainer.accelerator)
    runtime = make_runtime(params, sharded(backend, processes), trainer=trainer)
    runtime.judge = sharded_judge(runtime.judge, processes)
    history = run_selfplay(params, "kg_wcr", 1, runtime=runtime)
    (out / f"prompts_rank{processes.rank}.json").write_text(json.dumps(OrderFreeBackend.prompts_seen))
    if processes.is_main:
        state = {k: v.detach().cpu().clone() for k, v in trainer.unwrapped_model.state_dict().items()}
        torch.save({"state": state, "history": history, "processes": processes.world}, out / "result.pt")


if __name__ == "__main__":
    main(*sys.argv[1:4])
