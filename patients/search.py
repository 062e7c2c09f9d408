"""Patient search (docs/api-rules.md §9), bounded in cost however common the name.

The query is classified first, so each kind of match touches only its own index:

- letters: fuzzy name search, word by word. Patient names repeat heavily (a network has thousands of
  "Priya Sharma"s) and yet a million patients carry some 244,000 distinct full names, so a trigram scan
  of every distinct name costs hundreds of milliseconds. The distinct *words* of names are few (a few
  thousand; table patients_nameword, with patients_namepart saying which names hold each word, both kept
  by triggers from migration 0006). Each query word takes its best CANDIDATE_WORDS dictionary words by
  trigram similarity, by similarity of letter keys (each word's letters sorted, which a swap of two
  adjacent letters leaves unchanged: "niar" -> "nair") and by prefix ("priy" -> "priya"). Names holding
  candidates of the most query words, best word scores first, in any order (so swapped first and last
  names match), are the PRESELECTED_NAMES; they are ranked by three trigram measures of the whole name
  (similarity; strict word similarity, for partial names; similarity of letter keys), because each alone
  misranks common typos (found by the search-quality tests over a realistic population). The best
  CANDIDATE_NAMES are then expanded to patients with one LATERAL top-k per name on the
  (search_name, registered_at) B-tree, so "sharma" costs 50 short index scans, not a sort of every Sharma.
- digits: phone (a prefix of the reversed digits: full number with or without country prefix, or a
  4+ digit tail), the 14-digit ABHA number, and a patient_id made of digits.
- anything else with digits (PAT-000123, pat000123): patient_id, ignoring case and hyphens.

Ranking: identifier matches first, then phone matches, then name score; ties newest registration first.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from django.conf import settings
from django.db import connection

from clinic.text import like_prefix
from patients.identifiers import normalise_patient_ref

MIN_PHONE_TAIL = 4
CANDIDATE_NAMES = 50  # distinct names considered per query; each typo query's target ranks well within
CANDIDATE_WORDS = 8  # dictionary words per query word
PRESELECTED_NAMES = 200  # names ranked on the whole name, out of those holding candidate words


@dataclass(frozen=True)
class SearchFilters:
    branch_ids: frozenset[uuid.UUID] | None = None  # the client's restriction (None: all branches)
    branch_id: uuid.UUID | None = None
    registered_after: date | None = None
    registered_until: datetime | None = None  # the list's snapshot (`as_of`): later registrations left out

    def sql(self, alias: str) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []
        if self.branch_ids is not None:
            clauses.append(f"{alias}.registration_branch_id = ANY(%s)")
            params.append(list(self.branch_ids))
        if self.branch_id is not None:
            clauses.append(f"{alias}.registration_branch_id = %s")
            params.append(self.branch_id)
        if self.registered_after is not None:
            # Registered after the given day in the service's time zone, as registered_at__date means it.
            clauses.append(f"({alias}.registered_at AT TIME ZONE %s)::date > %s")
            params.extend([settings.TIME_ZONE, self.registered_after])
        if self.registered_until is not None:
            clauses.append(f"{alias}.registered_at <= %s")
            params.append(self.registered_until)
        return "".join(f" AND {clause}" for clause in clauses), params


def letter_key(text: str) -> str:
    """As patients_letter_key() in SQL: each word's letters sorted by code point, words kept in order."""
    return " ".join("".join(sorted(word)) for word in text.split())


def _fetch(sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())


def search(raw: str, filters: SearchFilters, *, offset: int, limit: int) -> tuple[list[uuid.UUID], int]:
    """Ids of the matching patients for one page, best first, and the total number of matches."""
    text = " ".join(raw.lower().split())
    if any(ch.isalpha() for ch in text) and not any(ch.isdigit() for ch in text):
        return _name_search(text, filters, offset=offset, limit=limit)
    return _identifier_search(raw, filters, offset=offset, limit=limit)


def _identifier_search(raw: str, filters: SearchFilters, *, offset: int, limit: int) -> tuple[list[uuid.UUID], int]:
    where, params = filters.sql("p")
    identifier = normalise_patient_ref(raw)
    digits = re.sub(r"\D", "", raw)
    branches = ["upper(replace(p.patient_id, '-', '')) = %s"]
    tier_params: list[Any] = [identifier]
    match_params: list[Any] = [identifier]
    tiers = "WHEN upper(replace(p.patient_id, '-', '')) = %s THEN 0"
    if identifier.isdigit() and len(identifier) == 14:
        branches.append("p.national_health_id = %s")
        match_params.append(identifier)
        tiers += " WHEN p.national_health_id = %s THEN 0"
        tier_params.append(identifier)
    if re.fullmatch(r"[0-9\s+().-]+", raw.strip()):
        # A tail is matched as typed ("0281") and without a trunk zero ("09845012345" -> "9845012345").
        for tail in dict.fromkeys([digits, digits.lstrip("0")]):
            if len(tail) >= MIN_PHONE_TAIL:
                branches.append("p.phone_digits_reversed LIKE %s")
                match_params.append(tail[::-1] + "%")  # digits only: no LIKE wildcards to escape
    sql = (
        f"SELECT p.id, CASE {tiers} ELSE 1 END AS tier, p.registered_at, count(*) OVER () "  # noqa: S608 - fixed SQL
        f"FROM patients_patient p WHERE ({' OR '.join(branches)}){where} "
        "ORDER BY tier, p.registered_at DESC, p.id LIMIT %s OFFSET %s"
    )
    rows = _fetch(sql, [*tier_params, *match_params, *params, limit, offset])
    total = rows[0][3] if rows else (_count_identifier(branches, match_params, where, params) if offset else 0)
    return [row[0] for row in rows], total


def _count_identifier(branches: list[str], match_params: list[Any], where: str, params: list[Any]) -> int:
    sql = f"SELECT count(*) FROM patients_patient p WHERE ({' OR '.join(branches)}){where}"  # noqa: S608
    return int(_fetch(sql, [*match_params, *params])[0][0])


def _name_search(text: str, filters: SearchFilters, *, offset: int, limit: int) -> tuple[list[uuid.UUID], int]:
    where, params = filters.sql("p")
    key = letter_key(text)
    words = text.split()
    # Ranked in ORDER BY only: each WHERE clause filters with index-backed operators alone.
    names = (
        "WITH q AS (SELECT * FROM unnest(%s::text[], %s::text[], %s::text[]) WITH ORDINALITY AS q(w, k, prefix, i)), "
        "candidates AS (SELECT q.i, c.word, c.score FROM q CROSS JOIN LATERAL ("
        "  SELECT d.word, similarity(d.word, q.w) + similarity(d.letter_key, q.k)"
        "    + CASE WHEN d.word LIKE q.prefix THEN 0.5 ELSE 0 END AS score"
        "  FROM patients_nameword d WHERE d.word %% q.w OR d.letter_key %% q.k OR d.word LIKE q.prefix"
        "  ORDER BY score DESC, d.word LIMIT %s) c), "
        "per_word AS (SELECT p.name, c.i, max(c.score) AS best FROM candidates c "
        "  JOIN patients_namepart p ON p.word = c.word GROUP BY p.name, c.i), "
        "preselected AS (SELECT name FROM per_word GROUP BY name "
        "  ORDER BY count(*) DESC, sum(best) DESC, name LIMIT %s) "
        "SELECT n.name FROM preselected JOIN patients_patientname n USING (name) ORDER BY "
        "similarity(n.name, %s) + strict_word_similarity(%s, n.name) + similarity(n.letter_key, %s) DESC, n.name "
        "LIMIT %s"
    )
    names_params = [
        words,
        [letter_key(word) for word in words],
        [like_prefix(word) for word in words],
        CANDIDATE_WORDS,
        PRESELECTED_NAMES,
        text,
        text,
        key,
        CANDIDATE_NAMES,
    ]
    ranked_names = [row[0] for row in _fetch(names, names_params)]
    if not ranked_names:
        return [], 0
    # The names, in rank order, as a relation for the two queries below.
    ranked = "unnest(%s::text[]) WITH ORDINALITY AS names(name, rank)"
    page_sql = (
        f"SELECT top.id FROM {ranked} CROSS JOIN LATERAL ("  # noqa: S608 - fixed SQL, values are parameters
        "  SELECT p.id, p.registered_at FROM patients_patient p "
        f"  WHERE p.search_name = names.name{where} ORDER BY p.registered_at DESC, p.id LIMIT %s"
        ") top ORDER BY names.rank, top.registered_at DESC, top.id LIMIT %s OFFSET %s"
    )
    rows = _fetch(page_sql, [ranked_names, *params, offset + limit, limit, offset])
    # Counted name by name through the same index: a join lets the planner scan every patient instead.
    count_sql = (
        f"SELECT coalesce(sum(matches.n), 0) FROM {ranked} CROSS JOIN LATERAL ("  # noqa: S608
        f"  SELECT count(*) AS n FROM patients_patient p WHERE p.search_name = names.name{where}"
        ") matches"
    )
    total = int(_fetch(count_sql, [ranked_names, *params])[0][0])
    return [row[0] for row in rows], total
