"""Train, evaluate and apply a citation sentiment classifier (DeLFT's citationClassifier): is a
citation context negative, neutral or positive about the work it cites?

    python delft/applications/citationClassifier.py train [--architecture gru] [--seed 1]
    python delft/applications/citationClassifier.py train_eval [--input corpus.txt] [--fold-count 5]
    python delft/applications/citationClassifier.py eval --test corpus.txt
    python delft/applications/citationClassifier.py classify [--file-in texts.txt] [--file-out out.json]

The data is the citation sentiment corpus of Athar (2011) in DeLFT's format: tab-separated lines
whose third field is n, o or p and fourth the quoted citation context (``--input``; default the
shared ``textClassification/citations/citation_sentiment_corpus.txt`` of ``DELFT_SHARED_DATA``).
The classes are weighted in the loss as DeLFT weighs them (negative 25, neutral 1, positive 9).
train early-stops on ``--valid``, else on 10% of the data; train_eval evaluates on ``--test``, else
on 10% held out first. Models are saved as ``<output>/citations_<architecture>/``.
"""
import os
import sys

if __package__ in (None, ""):  # run as a script: python delft/applications/citationClassifier.py
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from delft.applications import classifier_common, common, flow  # noqa: E402
from delft.applications.toolkits import TEXT_CLASSIFICATION  # noqa: E402

DATA = ("citations", "citation_sentiment_corpus.txt")
EXAMPLES = ["One successful strategy [15] computes the set-similarity involving (multi-word) "
            "keyphrases about the mentions and the entities, collected from the KG.",
            "Unfortunately, fewer than half of the OCs in the DAML02 OC catalog (Dias et al. "
            "2002) are suitable for use with the isochrone-fitting method because of the lack "
            "of a prominent main sequence, in addition to an absence of radial velocity and "
            "proper-motion data.",
            "However, we found that the pairwise approach of [10] performs poorly on our data."]


def training_file(args):
    return classifier_common.shared_file(args, DATA, "the citation sentiment corpus")


def read_file(path, option):
    from delft.textClassification.reader import read_citation_sentiment

    return read_citation_sentiment(common.existing_path(path, option))


APPLICATION = flow.Application(
    presets="citation", description="Train or apply a citation sentiment classifier.",
    model_name=lambda args: f"citations_{args.architecture}",
    read_train=lambda args: classifier_common.read_sets(args, read_file, training_file),
    read_eval=lambda args: classifier_common.read_eval_set(args, read_file),
    tag=lambda model, args: classifier_common.classify(model, args, EXAMPLES),
    add_options=classifier_common.add_data_options,
    check=lambda args: common.check_action_files(args, training_file),
    toolkit=TEXT_CLASSIFICATION)


main, command = flow.entry_points(APPLICATION)


if __name__ == "__main__":
    command()
