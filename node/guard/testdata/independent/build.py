# Assembles corpus.jsonl from the hand-written lists. Deterministic output.
import json, collections
ns = {}
for f in ("build_text_attacks.py", "build_text_benign.py", "build_sql_path.py"):
    exec(open(f, encoding="utf-8").read(), ns)
rows = []
def add(cat, field, attack, texts):
    for i, t in enumerate(texts, 1):
        rows.append({"id": f"{cat}-{i:03d}", "text": t, "attack": attack, "category": cat, "field": field})
for c, v in ns["ATTACK_TEXT"].items(): add(c, "text", True, v)
for c, v in ns["BENIGN_TEXT"].items(): add("benign_" + c, "text", False, v)
for c, v in ns["SQL"]["attack"].items(): add(c, "sql", True, v)
ren = {"filter_value": "sql_benign_filter", "read_query": "sql_benign_read"}
for c, v in ns["SQL"]["benign"].items(): add(ren[c], "sql", False, v)
for c, v in ns["PATH"]["attack"].items(): add("path_" + c, "path", True, v)
for c, v in ns["PATH"]["benign"].items(): add("path_benign_" + c, "path", False, v)
ids = [r["id"] for r in rows]; assert len(ids) == len(set(ids))
seen = collections.Counter((r["field"], r["text"]) for r in rows)
dups = [k for k, n in seen.items() if n > 1]; assert not dups, dups
with open("corpus.jsonl", "w", encoding="utf-8") as f:
    for r in rows: f.write(json.dumps(r, ensure_ascii=False) + "\n")
c = collections.Counter((r["field"], r["attack"]) for r in rows)
print(len(rows), dict(c))
for (fld, cat, a), n in sorted(collections.Counter((r["field"], r["category"], r["attack"]) for r in rows).items()):
    print(f"| {fld} | {cat} | {'attack' if a else 'benign'} | {n} |")
