"""EVE's params section, ``eve`` in params.yaml: its rewards, verifier, two phases and warm-start (registered with
``searchplay.config.register_section`` when the recipe is imported, and read as ``params.eve``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from searchplay.config import Section


class EveParams(Section):
    """EVE-Agent (Arai & Ichikawa 2026): the ``eve`` variant's rewards, verifier and two phases."""

    lambda_v: float = Field(0.5, description="lambda_V on the evidence verifier V-hat (Eq. 17); 0 with lambda_b 0 "
                            "is Dr. Zero (Eq. 18)")
    lambda_b: float = Field(0.1, description="lambda_B on the brevity bonus B(e) (Eq. 17)")
    lambda_e: float = Field(0.3, ge=0, description="lambda_E on the Solver's evidence F1 (Eq. 19)")
    l_max: int = Field(256, ge=1, description="L_max of B(e), in Proposer tokens (Eq. 15)")
    verifier_samples: int = Field(5, ge=1, description="m: single-turn, search-free answers per condition (Eq. 14)")
    verifier: Literal["sample", "logprob"] = Field(
        "sample", description="V-hat from m sampled answers with and without the evidence (the paper's runs), or "
        "the teacher-forced probability of the answer under each prompt (the paper's unused variant)")
    verifier_temperature: float = Field(1.0, ge=0, description="verifier decoding temperature (paper: unstated; "
                                        "the rollouts' 1.0 so the m samples differ)")
    verifier_max_tokens: int = Field(48, ge=1, description="tokens per verifier answer (paper: unstated)")
    phase_a_iterations: int | None = Field(None, ge=1, description="Phase A (Proposer) iterations; the rest of "
                                           "selfplay.iterations is Phase B (Solver). None: half, rounded up "
                                           "(paper: 50 + 50 steps)")
    phase_b_iterations: int | None = Field(None, ge=1, description="Phase B (Solver) iterations of a Phase B run "
                                           "(`--phase b`, the pipeline's selfplay@eve). None: the rest of "
                                           "selfplay.iterations, at least 1")
    hop_weights: list[float] = Field(default_factory=lambda: [4.0, 3.0, 2.0, 1.0],
                                     description="pmf of the hop count h = 1, 2, ... per source document (4:3:2:1)")
    document_tokens: int = Field(256, ge=16, description="source documents are cut to this many policy tokens "
                                 "(Dr. Zero's data preparation)")
    handoff_documents: int = Field(8, ge=1, description="held-out source documents the frozen Proposer turns into "
                                   "the Phase B Solver set")
    handoff_samples: int = Field(5, ge=1, description="Proposer samples per hand-off document; the valid one with "
                                 "the best format score is kept (Dr. Zero's generation script; App. C: five)")
    handoff_share: float = Field(0.2, gt=0, lt=1, description="share of the corpus held out for the hand-off "
                                 "(Dr. Zero: 1/5 of the prompt file); Phase A never sees it")
    require_verbatim: bool = Field(False, description="treat a non-verbatim evidence span as invalid (paper: no "
                                   "check; false logs the verbatim rate only)")
    selector: bool = Field(False, description="Phase A draws its source documents with the corpus selector (two "
                           "UCB1 bandits over document clusters and task types, App. F) instead of uniformly "
                           "(Alg. 1; the paper's runs)")
    selector_k0: int = Field(10, ge=1, description="K_0: initial clusters (Eq. 22)")
    selector_alpha: float = Field(0.0, ge=0, description="alpha of K_t = K_0 + floor(alpha t) (paper: not given; "
                                  "0 keeps the clusters fixed)")
    selector_beta: float = Field(1.0, gt=0, description="UCB exploration weight beta (Eq. 30)")
    selector_lambda_u: float = Field(0.5, ge=0, description="utility weight lambda_u (Eq. 33)")
    save_proposer: bool = Field(True, description="write the Phase A Proposer's weights to <checkpoint_dir>/eve/"
                                "proposer before Phase B starts from the initial weights")
    warmstart_demos: bool = Field(False, description="also demos of EVE's formats (Proposer (q, a, e), "
                                  "evidence-quoting Solver, single-turn verifier) in the shared warm-start, trained "
                                  "in turn with the others (the pipeline trains them in warmstart_eve instead)")
    warmstart_steps: int = Field(24, ge=1, description="steps of the warmstart_eve stage (`searchplay warmstart "
                                 "--eve`): the shared warm-start continued on EVE's formats, for the `eve` variant "
                                 "only")
    warmstart_out_dir: str = Field("checkpoints/warmstart_eve", description="the EVE warm-start's model/ folder")
    warmstart_reports_dir: str = Field("reports/warmstart_eve", description="the EVE warm-start's reports")
    seed: int = Field(0)
