"""Patient search (CONTRACT section 5), bounded in cost however common the name.

The query is classified first, so each kind of match touches only its own index:

- letters: fuzzy name search. Patient names repeat heavily (a network has thousands of "Priya
  Sharma"s), so the trigram search runs over the dictionary of distinct names (patients_patientname,
  kept by a trigger on patients_patient), using the pg_trgm `%` (similarity) and `%>` (word similarity)
  operators on its GIN index. The best candidate names are then expanded to patients with one
  LATERAL top-k per name on the (search_name, registered_at) B-tree, so "sharma" costs 50 short index
  scans, not a sort of every Sharma. similarity() is used only to rank names, never to filter.
  A name's score adds three trigram measures, because each alone misranks common typos (found by the
  search-quality tests over a realistic population): similarity of the whole name; strict word
  similarity (partial names, "priy shar"); and similarity of the letter keys (each word's letters
  sorted), which a swap of two adjacent letters leaves unchanged ("nisha niar" -> "nisha nair", where
  plain trigrams score "nisha das" as high).
- digits: phone (a prefix of the reversed digits: full number with or without country prefix, or a
  4+ digit tail), the 14-digit ABHA number, and a patient_id made of digits.
- anything else with digits (PAT-000123, pat000123): patient_id, ignoring case and hyphens.

Ranking: identifier matches first, then phone matches, then name score; ties newest registration first.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import date
from typing import Any

from django.conf import settings
from django.db import connection

from patients.identifiers import normalise_patient_ref

MIN_PHONE_TAIL = 4
CANDIDATE_NAMES = 50  # distinct names considered per query; each typo query's target ranks well within


@dataclass(frozen=True)
class SearchFilters:
    branch_ids: frozenset[uuid.UUID] | None = None  # the client's restriction (None: all branches)
    branch_id: uuid.UUID | None = None
    registered_after: date | None = None

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
    if re.fullmatch(r"[\d\s+().-]+", raw.strip()):
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
    # Ranked in ORDER BY only: the WHERE clause filters with the index-backed operators alone.
    names = (
        "SELECT n.name, row_number() OVER (ORDER BY "
        "similarity(n.name, %s) + strict_word_similarity(%s, n.name) + similarity(n.letter_key, %s) DESC, n.name"
        ") AS rank FROM patients_patientname n "
        "WHERE n.name %% %s OR n.name %%> %s OR n.letter_key %% %s "
        "ORDER BY rank LIMIT %s"
    )
    names_params = [text, text, key, text, text, key, CANDIDATE_NAMES]
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
