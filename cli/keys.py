"""``marg keys``: create a site's (or the learner's) key pairs, show key ids, fill a trust store.

Thin commands over :mod:`protocols.keys`; library errors become one line and an exit code
through :class:`marg.cli.app.MargTyper`.
"""


from pathlib import Path
from typing import Annotated, Optional

import typer

from marg.errors import InputError, RefusedError

from .app import sub_app
from .common import JsonOpt, emit_json


def _heavy() -> None:
    """Import the key module (cryptography) on first use, not at ``marg --help``."""
    global SIGN_PUB_SUFFIX, generate_keys, key_id, kind_name, load_any_public_key, load_verify_key
    global read_passphrase_file, validate_site_name
    from marg.protocols.keys import (
        SIGN_PUB_SUFFIX,
        generate_keys,
        key_id,
        kind_name,
        load_any_public_key,
        load_verify_key,
        read_passphrase_file,
        validate_site_name,
    )


DEFAULT_KEY_DIR = "marg-keys"

app = sub_app("Key pairs: Ed25519 to sign bundles and ledger entries, X25519 to receive sealed bundles.")


@app.command("init")
def init_cmd(
    site: Annotated[str, typer.Option("--site", help="Site (or learner) name; becomes the key file names.")],
    directory: Annotated[Path, typer.Option("--dir", help="Folder for the four key files.")] = Path(DEFAULT_KEY_DIR),
    passphrase_file: Annotated[
        Optional[Path], typer.Option("--passphrase-file",
                                     help="Encrypt the private keys with the passphrase in this file.")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace existing keys of this site (old signatures stop "
                                                        "verifying).")] = False,
    role: Annotated[str, typer.Option("--role", help="site (signs bundles and ledger entries) or learner (signs "
                                                     "models and secure rounds); written into the .sign.pub and "
                                                     "checked by verifiers.")] = "site",
    json_out: JsonOpt = False,
) -> None:
    """Create SITE.sign.key/.sign.pub (Ed25519) and SITE.seal.key/.seal.pub (X25519) in --dir."""
    _heavy()
    pw = read_passphrase_file(passphrase_file) if passphrase_file is not None else None
    kf = generate_keys(site, directory, passphrase=pw, overwrite=force, role=role)
    if json_out:
        emit_json(
            {
                "site": kf.site,
                "sign_key": str(kf.sign_key),
                "sign_pub": str(kf.sign_pub),
                "seal_key": str(kf.seal_key),
                "seal_pub": str(kf.seal_pub),
                "sign_key_id": kf.sign_id,
                "seal_key_id": kf.seal_id,
                "encrypted": kf.encrypted,
                "role": role,
            }
        )
        return
    enc = "passphrase-encrypted" if kf.encrypted else "NOT encrypted"
    typer.echo(f"wrote {kf.sign_key}  private signing key ({enc}, owner-only): keep it at the site, never share it")
    typer.echo(f"wrote {kf.sign_pub}  public signing key: give it to the learner for its trust store")
    typer.echo(f"wrote {kf.seal_key}  private sealing key ({enc}, owner-only): opens bundles sealed to {site!r}")
    typer.echo(f"wrote {kf.seal_pub}  public sealing key: sites seal bundles to it with `marg export --to`")
    typer.echo(f"signing key id {kf.sign_id} (role {role})")
    typer.echo(f"sealing key id {kf.seal_id}")
    typer.echo("Confirm key ids with the other party over a second channel (phone, letter) before trusting them.")


@app.command("show")
def show_cmd(
    key_file: Annotated[Path, typer.Argument(help="A public key file (.sign.pub or .seal.pub).")],
    json_out: JsonOpt = False,
) -> None:
    """Print a public key's kind and id (sha256 of its raw bytes), to compare out of band."""
    _heavy()
    key = load_any_public_key(key_file)
    kid = key_id(key)
    if json_out:
        emit_json({"file": str(key_file), "kind": kind_name(key), "key_id": kid})
        return
    typer.echo(f"{key_file}: {kind_name(key)}, key id {kid}")


@app.command("trust")
def trust_cmd(
    key_file: Annotated[Path, typer.Argument(help="A public key: SITE.sign.pub (to verify its files) or SITE.seal.pub "
                                                  "(a secure-aggregation roster).")],
    trust: Annotated[Path, typer.Option("--trust", help="The trust store (or roster) folder.")],
    site: Annotated[
        Optional[str], typer.Option("--site", help="Site name (default: the file name before .sign.pub / .seal.pub).")
    ] = None,
    expect_id: Annotated[
        Optional[str], typer.Option("--expect-id",
                                    help="Refuse unless the key id starts with this (as read out by the site).")
    ] = None,
    json_out: JsonOpt = False,
    role: Annotated[
        Optional[str], typer.Option("--role", help="Whose key you trust: site or learner (you say it, not the file; "
                                                   "default site — a file declaring learner is refused without --role "
                                                   "learner).")
    ] = None,
    replace: Annotated[bool, typer.Option("--replace",
                                          help="Replace a different key already trusted for this site (a site that "
                                               "replaced its key: confirm the new id with it first); said in the "
                                               "learner history.")] = False,
    history: Annotated[Optional[Path], typer.Option("--history",
                                                    help="The learner history that records a --replace (default "
                                                         "$MARG_HOME/learner-history.json).")] = None,
) -> None:
    """Add a site's public key to a trust store: SITE.sign.pub (signatures) or SITE.seal.pub (secure-aggregation
    roster).

    A site's SITE.seal.pub beside its SITE.sign.pub is trusted with it (a study's members folder pins both)."""
    _heavy()
    from marg.protocols.keys import SEAL_PUB_SUFFIX, load_seal_public_key

    sealing = key_file.name.endswith(SEAL_PUB_SUFFIX)
    suffix = SEAL_PUB_SUFFIX if sealing else SIGN_PUB_SUFFIX
    load = load_seal_public_key if sealing else load_verify_key
    key = load(key_file)
    name = site
    if name is None:
        if not key_file.name.endswith(suffix):
            raise InputError(f"cannot tell the site from file name {key_file.name!r}; give --site")
        name = key_file.name[: -len(suffix)]
    validate_site_name(name)
    kid = key_id(key)
    if expect_id is not None and (len(expect_id) < 8 or not kid.startswith(expect_id.lower())):
        raise RefusedError(f"key id {kid[:16]} of {key_file} does not match the expected {expect_id!r} (need >= 8 hex "
                           "chars)")
    from marg._util import atomic_write_bytes
    from marg.protocols.key_roles import read_role, with_role

    data = key_file.read_bytes()
    if role is not None:
        if sealing:
            raise InputError("--role applies to signing keys (.sign.pub)")
        data = with_role(data, role)
    elif not sealing and read_role(data) == "learner":
        # a key's own file does not make it a learner's: whoever trusts it says so (issue 35)
        raise RefusedError(f"{key_file.name} declares itself a learner's key; a file's own role line is not trusted: "
                           f"if you know it is the learner's, say so with --role learner (or --role site)")
    trust.mkdir(parents=True, exist_ok=True)
    # a site's sealing key beside its signing key is pinned with it (a study's members: both keys); a learner's is not
    # copied (a roster's sites are the folder's SITE.seal.pub files)
    site_key = not sealing and read_role(data) != "learner" and key_file.name.endswith(suffix)
    beside = key_file.parent / f"{key_file.name[: -len(suffix)]}{SEAL_PUB_SUFFIX}" if site_key else None
    seal = None
    if beside is not None and beside.exists():
        seal = (beside, load_seal_public_key(beside), trust / f"{name}{SEAL_PUB_SUFFIX}")
    targets = [(trust / f"{name}{suffix}", key, data, load)]
    if seal is not None:
        targets.append((seal[2], seal[1], beside.read_bytes(), load_seal_public_key))
    replaced = []
    for target, k, raw, loader in targets:
        if target.exists():
            old = key_id(loader(target))
            if old != key_id(k):
                if not replace:
                    raise RefusedError(f"trust store already holds a different key for site {name!r} ({old[:16]}) in "
                                       f"{target}: if the site replaced its key, confirm the new id with it and add "
                                       "--replace")
                replaced.append((target, old, key_id(k)))
    fresh = [(t, raw) for t, k, raw, loader in targets
             if not t.exists() or key_id(loader(t)) != key_id(k)
             or (t.name.endswith(SIGN_PUB_SUFFIX) and read_role(t.read_bytes()) != read_role(raw))]
    if not fresh:
        if json_out:
            emit_json({"site": name, "key_id": kid, "path": str(targets[0][0]), "added": False})
            return
        typer.echo(f"{targets[0][0]} already trusts this key ({kid[:16]})")
        return
    rec = None
    if any(t.name.endswith(SIGN_PUB_SUFFIX) for t, _, _ in replaced):
        from marg.protocols.history import History, default_history_path

        rec = History(history if history is not None else default_history_path())
        for t, old, new in replaced:
            if t.name.endswith(SIGN_PUB_SUFFIX):
                rec.record_replacement(name, old, new)
    for t, raw in fresh:
        atomic_write_bytes(t, raw, mode=0o644)
    if rec is not None:
        rec.save()
    target = targets[0][0]
    said = ("" if sealing
            else f" as a {read_role(data) or 'key of no declared role (an older marg; accepted as a site)'}")
    if json_out:
        emit_json({"site": name, "key_id": kid, "path": str(target), "added": True,
                   "role": None if sealing else read_role(data),
                   "seal_key_id": key_id(seal[1]) if seal else None, "replaced": [old for _, old, _ in replaced]})
        return
    typer.echo(f"trusted {name!r}{said}: key id {kid} → {target}")
    if seal is not None:
        typer.echo(f"trusted {name!r}'s sealing key beside it: key id {key_id(seal[1])} → {seal[2]} (confirm this id "
                   "too)")
    for t, old, new in replaced:
        typer.echo(f"replaced {t.name}: key {old[:16]} → {new[:16]}" + (" (recorded in the learner history)"
                                                                        if t.name.endswith(SIGN_PUB_SUFFIX) else ""))
