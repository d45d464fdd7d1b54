"""The Hugging Face example scripts' training paths, rebuilt from library pieces only (no code of this project).

What a user who runs the examples gets, for the benchmarks' baselines. Each builder follows one script of
huggingface/transformers `examples/pytorch/` (read at the transformers 5.x versions; the scripts themselves are
not copied here, only the steps that decide the training work are rebuilt):

* question-answering/run_qa.py: `load_dataset(ext, data_files, field="data")`; `prepare_train_features`
  (question left-stripped, `truncation="only_second"`, `stride=doc_stride`, overflowing tokens, answers labelled
  with the CLS index when outside the chunk); `padding="max_length"` unless `--pad_to_max_length False`; the
  collator `default_data_collator` when padded, else `DataCollatorWithPadding(pad_to_multiple_of=8 if fp16)`;
  the script's `QuestionAnsweringTrainer` only changes evaluation, so training is `Trainer.train`.
* text-classification/run_glue.py: `load_dataset("json", data_files)`; labels sorted and mapped
  (`label_to_id`); `preprocess_function` with `padding="max_length"` unless `--pad_to_max_length False`;
  `default_data_collator` when padded, `DataCollatorWithPadding(pad_to_multiple_of=8)` with fp16, else the
  Trainer's default collator (`DataCollatorWithPadding`).
* summarization/run_summarization.py: `preprocess_function` (inputs with `max_source_length`, targets with
  `text_target=`/`max_target_length`, pad ids -> -100 when padding to max length); `DataCollatorForSeq2Seq(
  model=model, label_pad_token_id=-100, pad_to_multiple_of=8 if fp16)`; `Seq2SeqTrainer`.

Flags are the scripts' command-line flags: `pad_to_max_length` (default True in run_qa/run_glue, False in
run_summarization), `train_sampling_strategy group_by_length` (transformers 5's name for `--group_by_length`),
`bf16`/`fp16`; anything else is a TrainingArguments default unless the benchmark passes it to every arm.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ExampleFlags:
    pad_to_max_length: bool
    group_by_length: bool
    bf16: bool = False
    fp16: bool = False


def example_defaults(task: str) -> ExampleFlags:
    """What the script does with no efficiency flag (fp32, random batches)."""
    return ExampleFlags(pad_to_max_length=task != "summarization", group_by_length=False)


def example_best(task: str, *, bf16: bool = False, fp16: bool = False) -> ExampleFlags:
    """The script at its best flags: dynamic padding, length-grouped batches, the precision this code uses."""
    return ExampleFlags(pad_to_max_length=False, group_by_length=True, bf16=bf16, fp16=fp16)


def _qa_train_features(raw, tokenizer, max_seq_length: int, doc_stride: int, pad: bool):
    """run_qa.py's prepare_train_features."""
    pad_on_right = tokenizer.padding_side == "right"
    question, context, answer = "question", "context", "answers"

    def prepare(examples):
        examples[question] = [q.lstrip() for q in examples[question]]
        enc = tokenizer(
            examples[question if pad_on_right else context],
            examples[context if pad_on_right else question],
            truncation="only_second" if pad_on_right else "only_first",
            max_length=max_seq_length,
            stride=doc_stride,
            return_overflowing_tokens=True,
            return_offsets_mapping=True,
            padding="max_length" if pad else False,
        )
        sample_mapping = enc.pop("overflow_to_sample_mapping")
        offset_mapping = enc.pop("offset_mapping")
        enc["start_positions"], enc["end_positions"] = [], []
        for i, offsets in enumerate(offset_mapping):
            input_ids = enc["input_ids"][i]
            if tokenizer.cls_token_id in input_ids:
                cls_index = input_ids.index(tokenizer.cls_token_id)
            elif tokenizer.bos_token_id in input_ids:
                cls_index = input_ids.index(tokenizer.bos_token_id)
            else:
                cls_index = 0
            sequence_ids = enc.sequence_ids(i)
            answers = examples[answer][sample_mapping[i]]
            if len(answers["answer_start"]) == 0:
                enc["start_positions"].append(cls_index)
                enc["end_positions"].append(cls_index)
                continue
            start_char = answers["answer_start"][0]
            end_char = start_char + len(answers["text"][0])
            token_start = 0
            while sequence_ids[token_start] != (1 if pad_on_right else 0):
                token_start += 1
            token_end = len(input_ids) - 1
            while sequence_ids[token_end] != (1 if pad_on_right else 0):
                token_end -= 1
            if not (offsets[token_start][0] <= start_char and offsets[token_end][1] >= end_char):
                enc["start_positions"].append(cls_index)
                enc["end_positions"].append(cls_index)
            else:
                while token_start < len(offsets) and offsets[token_start][0] <= start_char:
                    token_start += 1
                enc["start_positions"].append(token_start - 1)
                while offsets[token_end][1] >= end_char:
                    token_end -= 1
                enc["end_positions"].append(token_end + 1)
        return enc

    return raw.map(prepare, batched=True, remove_columns=raw.column_names, desc="run_qa train features")


def _training_args(cls, flags: ExampleFlags, *, output_dir: Path, max_steps: int, batch_size: int,
                   learning_rate: float, seed: int, warmup_steps: float, weight_decay: float, extra_args: dict):
    return cls(
        output_dir=str(output_dir),
        max_steps=max_steps,
        per_device_train_batch_size=batch_size,
        learning_rate=learning_rate,
        seed=seed,
        warmup_steps=warmup_steps,
        weight_decay=weight_decay,
        train_sampling_strategy="group_by_length" if flags.group_by_length else "random",
        bf16=flags.bf16,
        fp16=flags.fp16,
        save_strategy="no",
        logging_steps=max(max_steps, 1),
        report_to="none",
        disable_tqdm=True,
        **extra_args,
    )


def build_trainer(task: str, model_dir: Path, files: dict[str, Path], flags: ExampleFlags, *, output_dir: Path,
                  max_steps: int, batch_size: int, learning_rate: float, seed: int, max_seq_length: int,
                  warmup_steps: float = 0.0, weight_decay: float = 0.01, task_extra: dict | None = None,
                  extra_args: dict | None = None, model_overrides: dict | None = None):
    """(trainer, tokenizer) for `task`, built as the example script builds it with `flags`.

    `files` are workloads.write_data's paths; `extra_args` are further TrainingArguments given to every arm
    alike (the GPU benchmark's dataloader workers, torch_compile); `model_overrides` go to from_pretrained
    (attn_implementation, dtype).
    """
    import datasets
    from transformers import (
        AutoConfig,
        AutoModelForQuestionAnswering,
        AutoModelForSeq2SeqLM,
        AutoModelForSequenceClassification,
        AutoTokenizer,
        DataCollatorForSeq2Seq,
        DataCollatorWithPadding,
        Seq2SeqTrainer,
        Seq2SeqTrainingArguments,
        Trainer,
        TrainingArguments,
        default_data_collator,
        set_seed,
    )

    task_extra = task_extra or {}
    extra_args = extra_args or {}
    model_overrides = model_overrides or {}
    set_seed(seed)  # the scripts seed before loading the model
    tokenizer = AutoTokenizer.from_pretrained(model_dir, use_fast=True)
    max_seq_length = min(max_seq_length, tokenizer.model_max_length)
    common = dict(output_dir=output_dir, max_steps=max_steps, batch_size=batch_size, learning_rate=learning_rate,
                  seed=seed, warmup_steps=warmup_steps, weight_decay=weight_decay, extra_args=extra_args)

    if task == "question-answering":
        raw = datasets.load_dataset("json", data_files={"train": str(files["train_data_field"])}, field="data")["train"]
        config = AutoConfig.from_pretrained(model_dir)
        model = AutoModelForQuestionAnswering.from_pretrained(model_dir, config=config, **model_overrides)
        train = _qa_train_features(raw, tokenizer, max_seq_length, task_extra.get("doc_stride", 128),
                                   flags.pad_to_max_length)
        collator = (default_data_collator if flags.pad_to_max_length
                    else DataCollatorWithPadding(tokenizer, pad_to_multiple_of=8 if flags.fp16 else None))
        args = _training_args(TrainingArguments, flags, **common)
        return Trainer(model=model, args=args, train_dataset=train, processing_class=tokenizer,
                       data_collator=collator), tokenizer

    if task == "text-classification":
        raw = datasets.load_dataset("json", data_files={"train": str(files["train"])})["train"]
        label_list = sorted(raw.unique("label"))
        label_to_id = {v: i for i, v in enumerate(label_list)}
        non_label = [c for c in raw.column_names if c != "label"]
        key1, key2 = ("sentence1", "sentence2") if {"sentence1", "sentence2"} <= set(non_label) else (
            (non_label[0], non_label[1]) if len(non_label) >= 2 else (non_label[0], None))
        config = AutoConfig.from_pretrained(model_dir, num_labels=len(label_list))
        model = AutoModelForSequenceClassification.from_pretrained(model_dir, config=config, **model_overrides)
        model.config.label2id = label_to_id
        model.config.id2label = {i: label for label, i in label_to_id.items()}
        padding = "max_length" if flags.pad_to_max_length else False

        def preprocess(examples):
            texts = (examples[key1],) if key2 is None else (examples[key1], examples[key2])
            result = tokenizer(*texts, padding=padding, max_length=max_seq_length, truncation=True)
            result["label"] = [label_to_id[v] for v in examples["label"]]
            return result

        train = raw.map(preprocess, batched=True, desc="run_glue preprocess")
        if flags.pad_to_max_length:
            collator = default_data_collator
        elif flags.fp16:
            collator = DataCollatorWithPadding(tokenizer, pad_to_multiple_of=8)
        else:
            collator = None  # the Trainer's default: DataCollatorWithPadding(tokenizer)
        args = _training_args(TrainingArguments, flags, **common)
        return Trainer(model=model, args=args, train_dataset=train, processing_class=tokenizer,
                       data_collator=collator), tokenizer

    if task == "summarization":
        raw = datasets.load_dataset("json", data_files={"train": str(files["train"])})["train"]
        text_column, summary_column = raw.column_names[0], raw.column_names[1]
        config = AutoConfig.from_pretrained(model_dir)
        model = AutoModelForSeq2SeqLM.from_pretrained(model_dir, config=config, **model_overrides)
        if len(tokenizer) > model.get_input_embeddings().weight.shape[0]:
            model.resize_token_embeddings(len(tokenizer))
        if model.config.decoder_start_token_id is None:
            raise ValueError("Make sure that `config.decoder_start_token_id` is correctly defined")
        padding = "max_length" if flags.pad_to_max_length else False
        max_target_length = task_extra.get("max_target_length", 128)

        def preprocess(examples):
            inputs, targets = [], []
            for text, summary in zip(examples[text_column], examples[summary_column], strict=True):
                if text and summary:
                    inputs.append(text)
                    targets.append(summary)
            model_inputs = tokenizer(inputs, max_length=max_seq_length, padding=padding, truncation=True)
            labels = tokenizer(text_target=targets, max_length=max_target_length, padding=padding, truncation=True)
            if padding == "max_length":
                labels["input_ids"] = [[(t if t != tokenizer.pad_token_id else -100) for t in seq]
                                       for seq in labels["input_ids"]]
            model_inputs["labels"] = labels["input_ids"]
            return model_inputs

        train = raw.map(preprocess, batched=True, remove_columns=raw.column_names, desc="run_summarization")
        collator = DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100,
                                          pad_to_multiple_of=8 if flags.fp16 else None)
        args = _training_args(Seq2SeqTrainingArguments, flags, **common)
        return Seq2SeqTrainer(model=model, args=args, train_dataset=train, processing_class=tokenizer,
                              data_collator=collator), tokenizer

    raise ValueError(f"unknown task {task!r}")
