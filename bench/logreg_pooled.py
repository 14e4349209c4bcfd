"""The baseline of ``bench/learn.py --adult-sites``: scikit-learn's logistic regression on the sites' pooled rows.

Run (as a fresh process, so start-up is timed as marg's is):
    python bench/logreg_pooled.py SITE.tsv ... --test TEST.tsv

Reads the sites' TSV files (pandas), pools them, one-hot encodes the columns with few distinct
values and standardises the others (scikit-learn's ColumnTransformer), fits
``LogisticRegression(max_iter=1000)`` on the pooled rows and predicts the test rows; prints
the test accuracy. The label column is ``target``.
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("sites", nargs="+")
    ap.add_argument("--test", required=True)
    args = ap.parse_args()
    train = pd.concat([pd.read_csv(p, sep="\t") for p in args.sites], ignore_index=True)
    test = pd.read_csv(args.test, sep="\t")
    X, y = train.drop(columns="target"), train["target"]
    few = [c for c in X.columns if X[c].nunique() <= 50]
    many = [c for c in X.columns if c not in few]
    pre = ColumnTransformer([("onehot", OneHotEncoder(handle_unknown="ignore"), few),
                             ("scale", StandardScaler(), many)])
    model = make_pipeline(pre, LogisticRegression(max_iter=1000)).fit(X, y)
    acc = float(np.mean(model.predict(test.drop(columns="target")) == test["target"]))
    print(f"{acc:.4f}")


if __name__ == "__main__":
    main()
