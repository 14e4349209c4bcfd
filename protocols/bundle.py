"""The bundle: one site's export, a versioned self-describing binary file.

Layout::

    b"MARGBNDL"                       8 bytes, magic
    header length                     4 bytes, big-endian unsigned
    header                            canonical JSON (UTF-8, sorted keys, no spaces)
    payload                           the statistics' arrays, little-endian, concatenated

The header holds ``format`` ("marg-bundle"), ``version``, ``codebook_fingerprint``,
``codebook`` (the full codebook object, so a bundle is readable on its own), ``site``,
``created`` (UTF-8 ISO time), ``software``, ``n_rows`` (the site's row count, or null if it
was not released exactly), ``statistics`` (one entry per table: ``name``, ``kind``,
``clique``, ``shape``, ``dtype``, ``offset``, ``nbytes``, ``noise``), ``payload_sha256``,
``privacy`` (the export's total privacy cost), ``ledger`` (the site ledger position the release
occupies: ``seq``, ``prev``, ``origin``, ``prev_bundle``, :mod:`protocols.history`; null when
recorded nowhere), ``recipient`` and ``signature`` (null until
signed; the signature covers :meth:`Bundle.signing_bytes`, the canonical bytes with the
signature set to null). Serialisation is canonical, so ``to_bytes(from_bytes(b)) == b``.
"""

from __future__ import annotations

import hashlib
import math
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from marg._util import atomic_write_bytes, canonical_json, now_iso, parse_canonical
from marg.marginals.data.codebook import Codebook
from marg.errors import InputError, option
from marg.marginals.counts.noise import NoiseRecord
from marg.marginals.counts.tables import MarginalTable

MAGIC = b"MARGBNDL"
FORMAT = "marg-bundle"
VERSION = 1
DTYPES = {"<i8": np.dtype("<i8"), "<f8": np.dtype("<f8")}
MAX_HEADER = 64 << 20


def software_version() -> str:
    from marg import __version__

    return f"marg {__version__}"


def _round_trips(codebook: Codebook) -> bool:
    """Whether ``Codebook.from_dict(codebook.to_dict(include_draft=False))`` is ``codebook`` itself (equal):
    no draft flag to drop and no OMOP definitions to complete again."""
    return (not codebook.draft and codebook.omop is None and codebook.label.omop is None
            and all(f.omop is None for f in codebook.features))


@dataclass(frozen=True)
class Bundle:
    """A parsed bundle: the header dict and one array per statistic (header order).

    A bundle is a value: its header and arrays are never changed in place (:meth:`with_header` and
    :meth:`with_signature` make new bundles), so its canonical bytes and its parsed codebook are made
    once per bundle (a wide release's header holds thousands of features, and an export writes,
    digests, records and describes the same bundle)."""

    header: dict[str, Any]
    arrays: tuple[np.ndarray, ...]
    _memo: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    # ------------------------------------------------------------ building
    @classmethod
    def build(
        cls,
        codebook: Codebook,
        tables: Sequence[MarginalTable],
        *,
        site: str,
        n_rows: int | None,
        privacy: dict[str, Any] | None = None,
        created: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> "Bundle":
        """Assemble a bundle from a site's released tables."""
        if not isinstance(site, str) or not site.strip():
            raise InputError(f"site name must be a non-empty string, got {site!r}")
        stats, arrays, offset = [], [], 0
        for t in tables:
            c = t.counts  # integer counts are whole numbers: no rounding pass to find that out (a pass a table)
            exact_int = (t.noise.is_exact and t.kind == "counts"
                         and (c.dtype.kind in "iu" or bool(np.all(c == np.round(c)))))
            dtype = "<i8" if exact_int else "<f8"
            arr = np.ascontiguousarray(t.counts, dtype=DTYPES[dtype])
            stats.append(
                {
                    "name": t.name,
                    "kind": t.kind,
                    "clique": list(t.clique),
                    "shape": list(arr.shape),
                    "dtype": dtype,
                    "offset": offset,
                    "nbytes": int(arr.nbytes),
                    "noise": t.noise.to_dict(),
                }
            )
            arrays.append(arr)
            offset += arr.nbytes
        payload = b"".join(a.tobytes() for a in arrays)
        header: dict[str, Any] = {
            "format": FORMAT,
            "version": VERSION,
            "codebook_fingerprint": codebook.fingerprint,
            "codebook": codebook.to_dict(include_draft=False),
            "site": site,
            "created": created or now_iso(),
            "software": software_version(),
            "n_rows": n_rows,
            "statistics": stats,
            "payload_sha256": hashlib.sha256(payload).hexdigest(),
            "privacy": privacy or {"mechanism": "none", "epsilon": 0.0, "delta": 0.0, "rho": 0.0},
            "recipient": None,
            "signature": None,
        }
        if extra:
            header.update(extra)
        b = cls(header=header, arrays=tuple(arrays))
        if _round_trips(codebook):  # the header's codebook parses back to this one: no second parse
            b._memo["codebook"] = codebook
        return b

    # -------------------------------------------------------------- bytes
    def to_bytes(self) -> bytes:
        data = self._memo.get("bytes")
        if data is None:
            hdr = canonical_json(self.header)
            payload = b"".join(np.ascontiguousarray(a).tobytes() for a in self.arrays)
            data = self._memo["bytes"] = MAGIC + struct.pack(">I", len(hdr)) + hdr + payload
        return data

    def signing_bytes(self) -> bytes:
        """Canonical bytes of the bundle with ``signature`` = null (what gets signed)."""
        return self.with_signature(None).to_bytes()

    def with_signature(self, sig: dict[str, Any] | None) -> "Bundle":
        return self.with_header(signature=sig)

    def with_header(self, **fields: Any) -> "Bundle":
        h = dict(self.header)
        h.update(fields)
        b = Bundle(header=h, arrays=self.arrays)
        if "codebook" in self._memo and "codebook" not in fields and "codebook_fingerprint" not in fields:
            b._memo["codebook"] = self._memo["codebook"]
        return b

    def digest(self) -> str:
        """SHA-256 (hex) of the bundle's bytes."""
        d = self._memo.get("digest")
        if d is None:
            d = self._memo["digest"] = hashlib.sha256(self.to_bytes()).hexdigest()
        return d

    @classmethod
    def from_bytes(cls, data: bytes, *, source: str = "bundle") -> "Bundle":
        """Parse and validate; InputError with one line on anything malformed."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise InputError(f"{source}: expected bytes")
        data = bytes(data)
        if data[:8] == b"MARGSEAL":
            raise InputError(f"{source}: the bundle is sealed (encrypted); open it with the learner's sealing key "
                             f"({option('key')})")
        if len(data) < 12 or data[:8] != MAGIC:
            raise InputError(f"{source}: not a marg bundle (bad magic {data[:8]!r})")
        (hlen,) = struct.unpack(">I", data[8:12])
        if hlen > MAX_HEADER or 12 + hlen > len(data):
            raise InputError(f"{source}: truncated or corrupt header (length {hlen}, file {len(data)} bytes)")
        raw = data[12 : 12 + hlen]
        header, problem = parse_canonical(raw)
        if problem == "edited":
            raise InputError(f"{source}: header is not in canonical form (altered?)")
        if problem is not None:
            raise InputError(f"{source}: corrupt header "
                             f"({'not canonical JSON' if problem == 'not canonical' else problem})")
        if header.get("format") != FORMAT:
            raise InputError(f"{source}: not a marg bundle (format {header.get('format')!r})")
        if header.get("version") != VERSION:
            raise InputError(f"{source}: unsupported bundle version {header.get('version')!r} (this marg reads "
                             f"{VERSION})")
        payload = data[12 + hlen :]
        if hashlib.sha256(payload).hexdigest() != header.get("payload_sha256"):
            raise InputError(f"{source}: payload checksum mismatch (corrupt or altered data)")
        stats = header.get("statistics")
        if not isinstance(stats, list):
            raise InputError(f"{source}: header has no statistics list")
        sig = header.get("signature")
        if sig is not None and not isinstance(sig, dict):
            raise InputError(f"{source}: malformed signature record (expected an object or null)")
        for key in ("site", "codebook_fingerprint", "created"):
            if not isinstance(header.get(key), str):
                raise InputError(f"{source}: header field {key!r} must be a string")
        if not isinstance(header.get("codebook"), dict):
            raise InputError(f"{source}: header has no codebook object")
        if header.get("privacy") is not None and not isinstance(header.get("privacy"), dict):
            raise InputError(f"{source}: header field 'privacy' must be an object")
        arrays, pos = [], 0
        for k, st in enumerate(stats):
            try:
                dtype = DTYPES[st["dtype"]]
                shape = tuple(int(s) for s in st["shape"])
                off, nb = int(st["offset"]), int(st["nbytes"])
                if any(s < 0 for s in shape) or off != pos or nb != int(np.prod(shape)) * dtype.itemsize:
                    raise ValueError("inconsistent layout")
                if not isinstance(st["clique"], list) or not all(isinstance(c, str) for c in st["clique"]):
                    raise ValueError("bad clique")
                if not isinstance(st.get("noise", {}), dict):
                    raise ValueError("noise record is not an object")
                if st.get("kind", "counts") not in ("counts", "moments") or not isinstance(st.get("name"), str):
                    raise ValueError("bad kind or name")
            except (KeyError, TypeError, ValueError) as exc:
                raise InputError(f"{source}: statistic #{k} has a malformed entry ({exc})") from None
            if off + nb > len(payload):
                raise InputError(f"{source}: statistic {st.get('name')!r} runs past the end of the payload")
            arrays.append(np.frombuffer(payload, dtype=dtype, count=int(np.prod(shape)), offset=off).reshape(shape))
            pos = off + nb
        if pos != len(payload):
            raise InputError(f"{source}: {len(payload) - pos} stray bytes after the last statistic")
        return cls(header=header, arrays=tuple(arrays))

    # ---------------------------------------------------------- accessors
    @property
    def site(self) -> str:
        return str(self.header.get("site"))

    @property
    def fingerprint(self) -> str:
        return str(self.header.get("codebook_fingerprint"))

    @property
    def statistics(self) -> list[dict[str, Any]]:
        return list(self.header["statistics"])

    @property
    def signature(self) -> dict[str, Any] | None:
        return self.header.get("signature")

    @property
    def codebook(self) -> Codebook:
        cb = self._memo.get("codebook")
        if cb is None:
            cb = self._memo["codebook"] = self._parsed_codebook()
        return cb

    def _parsed_codebook(self) -> Codebook:
        cb = Codebook.from_dict(self.header.get("codebook"))
        if cb.fingerprint != self.fingerprint:
            raise InputError(
                f"bundle from site {self.site!r}: embedded codebook fingerprint {cb.fingerprint[:12]} does not match "
                f"the declared {self.fingerprint[:12]}"
            )
        return cb

    @property
    def tables(self) -> list[MarginalTable]:
        out = []
        for st, arr in zip(self.header["statistics"], self.arrays):
            out.append(
                MarginalTable(
                    clique=tuple(st["clique"]),
                    counts=np.array(arr),
                    noise=NoiseRecord.from_dict(st.get("noise") or {}),
                    kind=st.get("kind", "counts"),
                )
            )
        return out

    def describe(self) -> dict[str, Any]:
        """A plain summary for ``marg inspect``: what is inside, sizes, privacy cost."""
        stats = []
        for st in self.header["statistics"]:
            noise = st.get("noise") or {}
            stats.append(
                {
                    "name": st["name"],
                    "kind": st.get("kind", "counts"),
                    "clique": st["clique"],
                    "shape": st["shape"],
                    "cells": math.prod(int(x) for x in st["shape"]),
                    "mechanism": noise.get("mechanism", "none"),
                    "noise_std": noise.get("std", 0.0),
                    "epsilon": noise.get("epsilon", 0.0),
                    "rho": noise.get("rho", 0.0),
                }
            )
        sig = self.signature
        return {
            "site": self.site,
            "created": self.header.get("created"),
            "software": self.header.get("software"),
            "codebook_fingerprint": self.fingerprint,
            "label": (self.header.get("codebook") or {}).get("label"),
            "n_features": len((self.header.get("codebook") or {}).get("features") or []),
            "n_rows": self.header.get("n_rows"),
            "statistics": stats,
            "n_statistics": len(stats),
            "cells": sum(s["cells"] for s in stats),
            "privacy": self.header.get("privacy"),
            "recipient": self.header.get("recipient"),
            "source": self.header.get("source"),  # where the site counted (no credentials); None in older bundles
            "ledger": self.header.get("ledger"),  # its signed ledger position (None: --no-ledger, or an older marg)
            "signed": sig is not None,
            "signer": (sig or {}).get("key_id"),
            "digest": self.digest(),
        }

    # ---------------------------------------------------------------- files
    def save(self, path: str | Path) -> None:
        atomic_write_bytes(Path(path), self.to_bytes())


def read_bundle_bytes(path: str | Path) -> bytes:
    p = Path(path)
    try:
        return p.read_bytes()
    except FileNotFoundError:
        raise InputError(f"bundle file not found: {p}") from None
    except OSError as exc:
        raise InputError(f"cannot read bundle {p}: {exc.strerror}") from None


def load_bundle(path: str | Path) -> Bundle:
    """Read and parse a (plain, unsealed) bundle file."""
    return Bundle.from_bytes(read_bundle_bytes(path), source=str(path))
