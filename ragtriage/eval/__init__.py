"""Retrieval evaluation: eval sets, batch runs and what is measured on them.

Pure metrics in trec_eval conventions (`metrics`, `scoring`), the runner that replays every case of a
dataset version and stores each result (`runner`), run comparison with a paired randomization test
(`compare`, `significance`), the CI gate, the tuning commands (refusal calibration, rerank fitting,
chunk-size sweep, ablation, fine-tuning data), the doctor, and the eval-set file formats (case JSON and
JSONL, BEIR, TREC).
"""
