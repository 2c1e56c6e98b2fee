"""Benchmark the kg stage: ingestion MB/s and entities/s per core, peak RSS, extraction subgraphs/s.

    python benchmarks/kg_ingest.py [--size-mb 200] [--workers 1] [--keep DIR]
    python benchmarks/kg_ingest.py --compressed gz bz2 [--size-mb 40] [--source DUMP] [--repeat 3]

``--compressed`` compares, on .gz and .bz2 copies of the dump, one worker with two workers the old way
(every worker decompresses the whole stream and parses every second line) and the new way (the
stream is decompressed once and its line chunks go to the workers), repeated and alternated in one
run; it also times decompression alone and the chunk feed, the figures the full-dump estimate uses.
``--source`` repeats the entity lines of a real dump instead of generating synthetic ones.

Generates a synthetic but valid Wikidata JSON dump (``[``, one entity per line, ``]``) whose lines
look like real ones: labels/descriptions/aliases in several languages, sitelinks, and statements
of every datatype with qualifiers and references. Items link to other items so paths exist.
Ingestion runs in a child process per worker so peak RSS is measured per process (the target:
>= 20 MB/s per core on uncompressed input, peak RSS < 2 GB whatever the dump size).
"""

from __future__ import annotations

import argparse
import bz2
import gzip
import json
import multiprocessing
import random
import resource
import shutil
import statistics
import tempfile
import time
from pathlib import Path

LANGUAGES = ["en", "de", "fr", "es", "it", "ru", "ja", "zh", "pl", "nl"]
PROPERTIES = {"P17": "wikibase-item", "P131": "wikibase-item", "P47": "wikibase-item", "P361": "wikibase-item",
              "P569": "time", "P2044": "quantity", "P1448": "monolingualtext", "P214": "external-id",
              "P856": "url", "P18": "commonsMedia", "P625": "globe-coordinate", "P395": "string"}


def _snak(rng: random.Random, prop: str, datatype: str, num_items: int) -> dict:
    if datatype == "wikibase-item":
        n = rng.randrange(1, num_items)
        value = {"type": "wikibase-entityid", "value": {"entity-type": "item", "numeric-id": n, "id": f"Q{n}"}}
    elif datatype == "time":
        date = f"+{rng.randint(1000, 2020)}-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}T00:00:00Z"
        value = {"type": "time", "value": {"time": date, "timezone": 0, "before": 0, "after": 0,
                                           "precision": rng.choice([9, 10, 11]),
                                           "calendarmodel": "http://www.wikidata.org/entity/Q1985727"}}
    elif datatype == "quantity":
        value = {"type": "quantity", "value": {"amount": f"+{rng.randint(1, 9000)}",
                                               "unit": "http://www.wikidata.org/entity/Q11573"}}
    elif datatype == "monolingualtext":
        value = {"type": "monolingualtext", "value": {"text": f"Name {rng.random():.6f}", "language": "en"}}
    elif datatype == "globe-coordinate":
        value = {"type": "globecoordinate", "value": {"latitude": rng.uniform(-90, 90), "longitude": rng.uniform(
            -180, 180), "altitude": None, "precision": 0.0001, "globe": "http://www.wikidata.org/entity/Q2"}}
    else:
        value = {"type": "string", "value": f"value-{rng.getrandbits(40):x}"}
    return {"snaktype": "value", "property": prop, "hash": f"{rng.getrandbits(160):040x}", "datavalue": value,
            "datatype": datatype}


def synthetic_entity(rng: random.Random, n: int, num_items: int) -> dict:
    """One item shaped like a real dump line (about 3-4 kB)."""
    terms = {lang: {"language": lang, "value": f"Entity {n} ({lang})" if lang != "en" else f"Entity {n}"}
             for lang in LANGUAGES}
    claims = {}
    for prop, datatype in PROPERTIES.items():
        count = 3 if prop == "P47" else 1
        claims[prop] = [{"mainsnak": _snak(rng, prop, datatype, num_items), "type": "statement",
                         "id": f"Q{n}${rng.getrandbits(64):016x}", "rank": "preferred" if i == 0 and count > 1
                         else "normal",
                         "qualifiers": {"P580": [_snak(rng, "P580", "time", num_items)]},
                         "references": [{"hash": f"{rng.getrandbits(160):040x}",
                                         "snaks": {"P854": [_snak(rng, "P854", "url", num_items)]},
                                         "snaks-order": ["P854"]}]} for i in range(count)]
    return {"type": "item", "id": f"Q{n}", "labels": terms,
            "descriptions": {lang: {"language": lang, "value": f"synthetic entity number {n}"} for lang in LANGUAGES},
            "aliases": {"en": [{"language": "en", "value": f"E{n}"}]}, "claims": claims,
            "sitelinks": {"enwiki": {"site": "enwiki", "title": f"Entity {n}", "badges": []}},
            "lastrevid": rng.getrandbits(30), "modified": "2026-01-01T00:00:00Z"}


def generate(path: Path, size_mb: float, seed: int = 0) -> int:
    """Write a dump of at least ``size_mb`` MB; returns the entity count."""
    rng = random.Random(seed)
    target, written, n = size_mb * 1e6, 0, 0
    probe = len(json.dumps(synthetic_entity(random.Random(seed), 1, 10), separators=(",", ":")))
    estimate = int(target / probe) + 1  # link targets fall inside the dump
    with path.open("w", encoding="utf-8") as handle:
        handle.write("[\n")
        for prop, datatype in PROPERTIES.items():
            line = json.dumps({"type": "property", "id": prop, "datatype": datatype,
                               "labels": {"en": {"language": "en", "value": f"property {prop}"}}, "claims": {}},
                              separators=(",", ":"))
            handle.write(line + ",\n")
        while written < target:
            n += 1
            line = json.dumps(synthetic_entity(rng, n, estimate), separators=(",", ":"))
            handle.write(line + ",\n")
            written += len(line) + 2
        handle.write(json.dumps({"type": "item", "id": "Q0", "labels": {}, "claims": {}}) + "\n]\n")
    return n


def repeat_source(path: Path, source: Path, size_mb: float) -> int:
    """Write a dump of at least ``size_mb`` MB by repeating the entity lines of a real one; returns the line count."""
    lines = [line.rstrip(b",\n") + b",\n" for line in source.read_bytes().splitlines(keepends=True)
             if line.strip() not in (b"[", b"]", b"")]
    body = b"".join(lines)
    copies = max(1, int(size_mb * 1e6 / len(body)) + 1)
    path.write_bytes(b"[\n" + body * copies + b"]\n")
    return len(lines) * copies


def _old_shard(args: tuple[str, int, int, str]) -> int:
    """The old way, one worker: decompress the whole stream, parse lines ``number % count == index``."""
    from searchplay.kg.readers import DumpReader, open_dump
    from searchplay.kg.store import write_entities

    dump, index, count, shard = args
    reader = DumpReader(dump)
    with open_dump(Path(dump)) as handle:
        return write_entities(Path(shard), reader.parse(line for number, line in enumerate(handle)
                                                        if number % count == index))


def old_ingest(dump: Path, store_dir: Path, workers: int) -> None:
    """Ingestion of a compressed dump as it was before it was decompressed once: each worker reads all of it."""
    from searchplay.kg.store import STORE_FILE, Piece, _index, _merge

    store_dir.mkdir(parents=True, exist_ok=True)
    shards = [str(store_dir / f"shard-{i}.sqlite") for i in range(workers)]
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        pool.map(_old_shard, [(str(dump), i, workers, shard) for i, shard in enumerate(shards)])
    _merge(store_dir / STORE_FILE, [Piece(shard) for shard in shards])
    _index(store_dir / STORE_FILE)


def decompression_rates(dump: Path, threads: int, repeat: int) -> dict[str, list[float]]:
    """MB of decompressed output per CPU-second of this process (all its threads), ``repeat`` times: the stdlib,
    indexed_bzip2 on 1 and ``threads`` threads (.bz2), and the chunk feed the workers get (decompression, cutting
    at lines). CPU time, not wall time: what a core can do, whatever else the machine runs."""
    from searchplay.kg.readers import DumpReader, open_dump

    def rate(read) -> float:
        start, size = time.process_time(), read()
        return size / 1e6 / (time.process_time() - start)

    def drain(handle) -> int:
        with handle:
            return sum(len(block) for block in iter(lambda: handle.read(1 << 22), b""))

    def indexed(count: int):
        import indexed_bzip2

        return lambda: drain(indexed_bzip2.open(str(dump), parallelization=count))

    readers = {"stdlib": lambda: drain(open_dump(dump))}
    if dump.suffix == ".bz2":
        readers |= {"indexed_bzip2 x1": indexed(1), f"indexed_bzip2 x{threads}": indexed(threads)}
    readers[f"chunk feed x{threads}"] = lambda: sum(len(chunk) for _, chunk in DumpReader(dump).chunks(threads))
    return {name: [rate(read) for _ in range(repeat)] for name, read in readers.items()}


def _cpu_seconds() -> float:
    """CPU time of this process and its finished children (the ingest workers), all threads."""
    return sum(resource.getrusage(who).ru_utime + resource.getrusage(who).ru_stime
               for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))


def compare(plain: Path, folder: Path, suffixes: list[str], repeat: int) -> None:
    """One worker, two the old way, two the new way, on each compression; ``repeat`` rounds, alternated."""
    from searchplay.kg.store import ingest_dump

    for suffix in suffixes:
        dump = folder / f"{plain.name}.{suffix}"
        with plain.open("rb") as src, (gzip.open if suffix == "gz" else bz2.open)(dump, "wb") as dst:
            shutil.copyfileobj(src, dst)
        size_mb = plain.stat().st_size / 1e6
        print(f"\n.{suffix}: {dump.stat().st_size / 1e6:.1f} MB compressed, {size_mb:.1f} MB of JSON; decompressed "
              "MB per CPU-second, median (runs): " + ", ".join(
                  f"{name} {statistics.median(rates):.0f} ({' '.join(f'{r:.0f}' for r in rates)})"
                  for name, rates in decompression_rates(dump, 2, repeat).items()))
        runs = {"1 worker": lambda d, dump=dump: ingest_dump(dump, d),
                "2 workers, old (each decompresses all)": lambda d, dump=dump: old_ingest(dump, d, 2),
                "2 workers, new (decompressed once)": lambda d, dump=dump: ingest_dump(dump, d, workers=2)}
        times: dict[str, list[float]] = {name: [] for name in runs}
        cpu: dict[str, list[float]] = {name: [] for name in runs}
        for round_ in range(repeat):
            for name in list(runs)[:: 1 if round_ % 2 == 0 else -1]:  # alternate the order against drift
                store = folder / "store"
                shutil.rmtree(store, ignore_errors=True)
                start, cpu_start = time.perf_counter(), _cpu_seconds()
                runs[name](store)
                times[name].append(time.perf_counter() - start)
                cpu[name].append(_cpu_seconds() - cpu_start)
        for name, seconds in times.items():
            median = statistics.median(seconds)
            print(f"  {name:<40} median {median:6.2f} s  ({size_mb / median:5.1f} MB/s), "
                  f"{statistics.median(cpu[name]):5.2f} CPU-s; runs " + " ".join(f"{s:.2f}" for s in seconds))
        old, new, one = (statistics.median(times[name]) for name in (*list(runs)[1:], "1 worker"))
        print(f"  new / old with 2 workers: {old / new:.2f}x faster; 2 workers new / 1 worker: {one / new:.2f}x")


def _ingest_child(dump: str, store: str, workers: int, queue) -> None:
    from searchplay.kg.store import ingest_dump

    start = time.perf_counter()
    report = ingest_dump(dump, store, workers=workers)
    seconds = time.perf_counter() - start
    rss_self = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rss_children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    queue.put({"seconds": seconds, "entities": report.entities, "bytes": report.bytes_read,
               "peak_rss_mb": max(rss_self, rss_children)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size-mb", type=float, default=200.0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--subgraphs", type=int, default=500)
    parser.add_argument("--keep", type=Path, default=None, help="keep the dump and store in this folder")
    parser.add_argument("--compressed", nargs="+", choices=["gz", "bz2"], default=None,
                        help="compare 1 worker, 2 the old way and 2 the new way on these compressions")
    parser.add_argument("--source", type=Path, default=None, help="repeat this dump's entity lines (real ones)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds of the --compressed comparison")
    args = parser.parse_args()

    folder = args.keep or Path(tempfile.mkdtemp(prefix="kg_bench_"))
    folder.mkdir(parents=True, exist_ok=True)
    dump = folder / "synthetic-dump.json"
    start = time.perf_counter()
    entities = repeat_source(dump, args.source, args.size_mb) if args.source else generate(dump, args.size_mb)
    size_mb = dump.stat().st_size / 1e6
    print(f"{'repeated ' + str(args.source) if args.source else 'generated'} {dump} ({size_mb:.1f} MB, {entities} "
          f"items) in {time.perf_counter() - start:.1f} s")
    if args.compressed:
        compare(dump, folder, args.compressed, args.repeat)
        if args.keep is None:
            shutil.rmtree(folder)
        return

    queue = multiprocessing.get_context("spawn").Queue()
    child = multiprocessing.get_context("spawn").Process(target=_ingest_child,
                                                          args=(str(dump), str(folder / "store"), args.workers, queue))
    child.start()
    result = queue.get()
    child.join()
    mb_s = result["bytes"] / 1e6 / result["seconds"]
    print(f"ingestion ({args.workers} worker(s)): {result['seconds']:.1f} s, {mb_s:.1f} MB/s, "
          f"{mb_s / args.workers:.1f} MB/s per core, {result['entities'] / result['seconds'] / args.workers:,.0f} "
          f"entities/s per core, peak RSS {result['peak_rss_mb']:.0f} MB")

    from searchplay.config import KGConfig
    from searchplay.kg.extract import extract_subgraphs
    from searchplay.kg.relations import RelationFilter
    from searchplay.kg.selectors import RandomSelector
    from searchplay.kg.store import GraphStore

    config = KGConfig(selector="random", selector_batch_size=64)
    store = GraphStore(folder / "store")
    seeds = [f"Q{i}" for i in random.Random(0).sample(range(1, entities + 1), min(entities, args.subgraphs * 4))]
    start = time.perf_counter()
    records, stats = extract_subgraphs(store, seeds, RandomSelector(0), RelationFilter.from_config(config), config,
                                       args.subgraphs, random.Random(0))
    seconds = time.perf_counter() - start
    print(f"extraction (random selector): {len(records)} subgraphs in {seconds:.1f} s, "
          f"{len(records) / seconds:.1f} subgraphs/s ({stats.seeds_tried} seeds tried)")
    if args.keep is None:
        shutil.rmtree(folder)


if __name__ == "__main__":
    main()
