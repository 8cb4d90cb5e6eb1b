"""What the application scripts share: options, the 90/10 splits, and train / eval / tag flows.

Each script (grobidTagger, nerTagger, insultTagger) only says how to read its data and which
defaults its models take; a user's error (bad file, bad option) ends as one line on stderr.
"""
import argparse
import functools
import logging
import os
import sys

from delft.utilities.errors import DelftError

DEFAULT_OUTPUT = "data/models/sequenceLabelling/"


def add_common_options(parser, architecture_default="BidLSTM_CRF"):
    """Options every tagger takes; each maps to a ``Sequence`` argument of the same name."""
    parser.add_argument("action", choices=["train", "train_eval", "eval", "tag"])
    parser.add_argument("--architecture", default=architecture_default,
                        help="BidLSTM_CRF (default), BidLSTM, BidLSTM_CRF_FEATURES, BERT_CRF, ...")
    parser.add_argument("--transformer", default=None,
                        help="local Hugging Face checkpoint directory (or registered name)")
    parser.add_argument("--embedding", default=None, help="word embeddings (not available offline)")
    parser.add_argument("--use-ELMo", action="store_true", help="not supported (kept for scripts)")
    parser.add_argument("--fold-count", type=int, default=1)
    parser.add_argument("--input", default=None, help="training/evaluation/tagging data file")
    parser.add_argument("--output", default=DEFAULT_OUTPUT, help="directory of saved models")
    parser.add_argument("--input-model", default=None,
                        help="directory holding the model to load (eval, tag, --incremental)")
    parser.add_argument("--max-sequence-length", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=None, help="global batch size")
    parser.add_argument("--patience", type=int, default=None)
    parser.add_argument("--learning-rate", type=float, default=None)
    parser.add_argument("--max-epoch", type=int, default=None)
    parser.add_argument("--recurrent-dropout", type=float, default=None)
    parser.add_argument("--lr-schedule", default="plateau", choices=["plateau", "exponential"],
                        help="reduce the learning rate on a validation plateau (DeLFT 1.2) or "
                             "every epoch (DeLFT 0.4.6); factor 0.9")
    parser.add_argument("--early-stop", dest="early_stop", action="store_true", default=True)
    parser.add_argument("--no-early-stop", dest="early_stop", action="store_false")
    parser.add_argument("--multi-gpu", action="store_true",
                        help="mirror over all GPUs (or DELFT_CPU_REPLICAS logical CPUs)")
    parser.add_argument("--incremental", action="store_true")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--window-stride", type=int, default=None,
                        help="overlap long texts in windows of max length, this stride apart")
    parser.add_argument("--output-format", default="json", choices=["json", "iob", "TEI"])
    parser.add_argument("--num-workers", type=int, default=None,
                        help="accepted for DeLFT scripts; tf.data prefetches in its own threads")
    parser.add_argument("--wandb", action="store_true", help="not supported here (no network)")
    return parser


def split(x, y, f, test_size, seed):
    """A seeded split that keeps tokens, labels and features aligned (f may be None)."""
    from sklearn.model_selection import train_test_split

    arrays = [x, y] if f is None else [x, y, f]
    parts = train_test_split(*arrays, test_size=test_size, random_state=seed)
    first, second = parts[0::2], parts[1::2]
    if f is None:
        return (first[0], first[1], None), (second[0], second[1], None)
    return tuple(first), tuple(second)


def run_action(args, model_name, data, sequence_kwargs, load_tag_input):
    """Run ``args.action`` for ``model_name`` on ``data`` = (x, y, f) (loaded lazily by callers)."""
    from delft.sequenceLabelling import Sequence
    from delft.utilities.devices import StrategyContext

    # read (and so check) the data before TensorFlow starts: a bad file is then one line on stderr
    # in a second, not after TF's start-up logging
    loaded = data() if args.action in ("train", "train_eval", "eval") else None
    with StrategyContext(args.multi_gpu):
        if args.action in ("train", "train_eval"):
            x, y, f = loaded
            model = Sequence(model_name, **sequence_kwargs)
            if args.incremental:
                model.load(args.input_model or args.output, multi_gpu=args.multi_gpu)
                model.training_config = Sequence(model_name, **sequence_kwargs).training_config
            if args.action == "train_eval":
                (x, y, f), (x_eval, y_eval, f_eval) = split(x, y, f, 0.1, args.seed)
            train, valid = split(x, y, f, 0.1, args.seed)
            print(f"{len(train[0])} train sequences, {len(valid[0])} validation sequences"
                  + (f", {len(x_eval)} evaluation sequences" if args.action == "train_eval" else ""),
                  flush=True)
            if args.fold_count > 1:
                model.train_nfold(train[0], train[1], train[2], valid[0], valid[1], valid[2],
                                  multi_gpu=args.multi_gpu)
            else:
                model.train(train[0], train[1], train[2], valid[0], valid[1], valid[2],
                            incremental=args.incremental, multi_gpu=args.multi_gpu)
            if args.action == "train_eval":
                print("\nEvaluation:", flush=True)
                model.eval(x_eval, y_eval, features=f_eval, multi_gpu=args.multi_gpu)
            model.save(args.output)
        elif args.action == "eval":
            x, y, f = loaded
            model = Sequence(model_name).load(args.input_model or args.output,
                                               multi_gpu=args.multi_gpu)
            model.eval(x, y, features=f, multi_gpu=args.multi_gpu)
        else:
            model = Sequence(model_name).load(args.input_model or args.output,
                                               multi_gpu=args.multi_gpu)
            load_tag_input(model)


TRANSFORMER_MAX_LENGTH = 512


def model_options(args, rnn_defaults, transformer_defaults):
    """``Sequence`` arguments with the defaults of the architecture's family (transformers capped
    at their 512-subtoken limit)."""
    from delft.sequenceLabelling.models import architecture_family

    uses_transformer = architecture_family(args.architecture) == "transformer"
    kwargs = sequence_options(args, transformer_defaults if uses_transformer else rnn_defaults)
    if uses_transformer:
        kwargs["max_sequence_length"] = min(kwargs["max_sequence_length"], TRANSFORMER_MAX_LENGTH)
    return kwargs


def sequence_options(args, defaults):
    """``Sequence`` keyword arguments: the options given, else the per-model ``defaults``."""
    def pick(value, key, fallback):
        return value if value is not None else defaults.get(key, fallback)

    return dict(architecture=args.architecture, transformer_name=args.transformer,
                embeddings_name=args.embedding, use_ELMo=args.use_ELMo,
                max_sequence_length=pick(args.max_sequence_length, "max_sequence_length", 3000),
                batch_size=pick(args.batch_size, "batch_size", 20),
                max_epoch=pick(args.max_epoch, "max_epoch", 60),
                patience=pick(args.patience, "patience", 5),
                recurrent_dropout=pick(args.recurrent_dropout, "recurrent_dropout", 0.0),
                learning_rate=args.learning_rate, early_stop=args.early_stop,
                fold_number=args.fold_count, seed=args.seed, window_stride=args.window_stride,
                lr_schedule=args.lr_schedule)


def user_errors_are_one_line(main):
    """Run ``main``; a :class:`DelftError` (bad data, bad option, bad model dir) prints one line."""
    @functools.wraps(main)
    def wrapped(argv=None):
        logging.basicConfig(level=logging.INFO, format="%(message)s")
        try:
            return main(argv)
        except (DelftError, FileNotFoundError, IsADirectoryError, PermissionError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    return wrapped


def command_for(main):
    """The console script of a command: ``main`` on the command line's arguments, then the
    process ends with its exit code, skipping the interpreter's teardown of TensorFlow's objects
    (about 1 s of a 15 s train_eval, and nothing to save).

    Output is flushed and the strategies closed first; in-process users call ``main`` instead.
    """
    def command():
        code = main()
        from delft.utilities import devices

        devices.close_strategies()
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code or 0)

    return command


def new_parser(description):
    return argparse.ArgumentParser(description=description)
