"""Entity and relation rows that look like real text, for the base-model build (issue #13 item 3).

What ``synthetic.py``'s 25 entity templates do not teach, and real text (news, tweets, reviews)
needs:
- **Many kinds under many label names, consistently.** Every mention has a fine kind (``city``,
  ``band``, ``film``…); a prompt label names a *set* of kinds (``location`` = city, country, region,
  landmark; ``group`` = team, band, party; ``creative work`` = film, book, song…). The labels of one
  prompt never share a kind, and a mention is gold under the label whose set holds its kind, so
  "location" never silently excludes the country in the same text. Kinds the prompt does not ask for
  stay in the text unlabelled (only extract what is asked).
- **Common label schemes** (person/organization/location; the six emerging-entity types;
  OntoNotes-style types) as well as single ad-hoc labels and absent (distractor) labels.
- **Surface variety**: several hundred values per kind (``world.py``), sentence patterns in news,
  social, review, headline and dialogue registers, lower-cased and title-cased texts, @handles,
  hashtags and links as hard negatives, entity-free filler sentences.
- **Relations** of the common kinds (works for, lives in, based in, located in, killed, born in,
  founded, member of, made by…) in several phrasings each, with other entities around them.

Deterministic for a given seed and Faker version.
"""

from __future__ import annotations

import random
from typing import Any, Dict, List, Optional, Tuple

from .world import World

ORG = ("company", "agency", "university", "team", "band", "party", "media")
LOC = ("city", "country", "region", "landmark")
PRODUCT = ("device", "software", "vehicle")
WORK = ("film", "book", "song", "tv_show", "album", "game")

# label -> kinds it covers
LABELS: Dict[str, Tuple[str, ...]] = {
    "person": ("person",), "people": ("person",), "person name": ("person",), "name": ("person",),
    "individual": ("person",), "PER": ("person",),
    "organization": ORG, "organisation": ORG, "ORG": ORG,
    "company": ("company",), "corporation": ("company", "media"), "business": ("company",), "firm": ("company",),
    "government agency": ("agency",), "institution": ("agency", "university"),
    "university": ("university",), "school": ("university",),
    "group": ("team", "band", "party"), "sports team": ("team",), "team": ("team",), "band": ("band",),
    "music group": ("band",), "political party": ("party",), "news outlet": ("media",), "media organization": ("media",),
    "location": LOC, "place": LOC, "LOC": LOC, "city": ("city",), "town": ("city",), "country": ("country",),
    "nation": ("country",), "region": ("region",), "state or province": ("region",), "landmark": ("landmark",),
    "facility": ("landmark",), "geopolitical entity": ("city", "country", "region"), "GPE": ("city", "country", "region"),
    "product": PRODUCT, "device": ("device",), "gadget": ("device",), "software": ("software",), "app": ("software",),
    "vehicle": ("vehicle",), "car model": ("vehicle",),
    "creative work": WORK, "work of art": WORK, "title": WORK, "movie": ("film",), "film": ("film",), "book": ("book",),
    "song": ("song",), "tv show": ("tv_show",), "album": ("album",), "video game": ("game",),
    "event": ("event",), "date": ("date",), "money": ("money",), "amount of money": ("money",), "price": ("money",),
    "percentage": ("percent",), "job title": ("job",), "occupation": ("job",), "profession": ("job",),
    "nationality": ("nationality",), "nationality or religious group": ("nationality",), "NORP": ("nationality",),
    "email": ("email",), "email address": ("email",), "phone number": ("phone",),
    "programming language": ("programming_language",), "language": ("language",),
    "drug": ("drug",), "medication": ("drug",), "disease": ("disease",), "medical condition": ("disease",),
}
DESCRIPTIONS: Dict[str, str] = {
    "person": "names of people", "organization": "companies, agencies, institutions, teams, bands and parties",
    "location": "cities, countries, regions and named places", "corporation": "names of companies and media businesses",
    "group": "sports teams, music bands and political parties", "product": "named devices, software and vehicles",
    "creative work": "titles of films, books, songs, shows, albums and games", "event": "named events",
    "date": "dates and days", "money": "amounts of money", "nationality": "nationalities, religious and political groups",
    "job title": "job titles and occupations", "landmark": "named buildings, bridges, parks, airports and other places",
}
SCHEMES: List[Dict[str, Tuple[str, ...]]] = [
    {"person": ("person",), "location": LOC, "corporation": ("company", "media"), "product": PRODUCT,
     "creative work": WORK, "group": ("team", "band", "party")},
    {"person": ("person",), "organization": ORG, "location": LOC},
    {"person": ("person",), "organization": ORG, "location": LOC, "nationality": ("nationality",)},
    {"PER": ("person",), "ORG": ORG, "LOC": LOC},
    {"person": ("person",), "organization": ORG, "GPE": ("city", "country", "region"), "facility": ("landmark",),
     "NORP": ("nationality",), "date": ("date",), "money": ("money",), "event": ("event",), "product": PRODUCT,
     "work of art": WORK},
]

# Sentence patterns: {kind} or {kind#n} slots.
NEWS = [
    "{person}, the {job} of {company}, said on {date} that the firm would cut {percent} of its staff in {city}.",
    "{agency} officials in {city} confirmed that {person#1} and {person#2} had been arrested.",
    "The {nationality} government has asked {company} to open a factory in {region}.",
    "{person} was elected mayor of {city} after a close race against {person#2} of the {party}.",
    "Police said the attack happened near {landmark} in {city} late on {date}.",
    "{company} agreed to buy {company#2} for {money}, the companies said in a statement.",
    "{person}, who was born in {city}, moved to {country} in {date}.",
    "Speaking to {media}, {person} said the {party} would not support the budget.",
    "Flights between {city} and {city#2} were suspended after the storm hit {region}.",
    "The {team} beat the {team#2} 3-1 at {landmark} on {date}.",
    "{person} scored twice as {team} won the {event}.",
    "Researchers at {university} found that {drug} cut the risk of {disease} by {percent}.",
    "Thousands of {nationality} workers marched through {city} to protest the new law.",
    "The {event} in {city} drew more than 40,000 visitors, organisers said.",
    "{company} shares rose {percent} after it unveiled the {device}.",
    "{country} and {country#2} signed a trade deal worth {money} on {date}.",
    "A spokesman for {agency} declined to comment on the report by {media}.",
    "{person} ({party}) criticised the {agency} over the delays.",
    "The body of {person} was found near {landmark}, {media} reported.",
    "{person} killed {person#2} in a shooting in {city}, prosecutors said.",
    "{person}, a {nationality} {job}, has lived in {city} since {date}.",
    "{company}, based in {city}, employs about 2,000 people in {country}.",
    "Former {job} {person} joined {company} as chief executive on {date}.",
    "The {university} team was led by {person}, a professor of biology.",
    "Heavy rain flooded parts of {region} and closed {landmark} on {date}.",
]
SOCIAL = [
    "just watched {film} with {person} and omg the ending",
    "cant stop listening to {song} by {band} 🔥",
    "anyone else think {device} is overpriced?? {company} pls",
    "heading to {city} for the {event} this weekend!!",
    "{band} live at {landmark} tonight, who's coming",
    "finally finished {book}, {person} is a genius",
    "my {device} keeps crashing since the {software} update smh",
    "so proud of {person} and the whole {team} squad",
    "{tv_show} season finale tonight, no spoilers please",
    "playing {game} all weekend lol",
    "happy birthday {person} ! miss u in {city}",
    "new {album} from {band} is out now",
    "{company} customer service is the worst, been on hold for an hour",
    "stuck at {landmark} again, trains are a mess today",
    "who's watching the {team} game tonight?",
    "loving the new {software} update, way faster",
    "can't believe {person} left {band}",
    "greetings from {city} , {country} !",
]
REVIEW = [
    "I bought the {device} from {company} for {money} and it stopped working after a week.",
    "We stayed at a hotel near {landmark} in {city}; the staff were friendly.",
    "The new {vehicle} from {company} drives well but the app, {software}, is slow.",
    "{book} by {person} is the best novel I have read this year.",
    "If you liked {film}, you will love {tv_show}.",
    "Ordered through {software}, delivered to {city} on {date}, great value at {money}.",
]
DIALOGUE = [
    "Can you book me a table in {city} for {date}? It's for {person}.",
    "Hi {person}, please call me at {phone} or write to {email} before {date}.",
    "Did {person} ever get back to you about the {company} contract?",
    "Let's meet at {landmark} after the {event}.",
    "My sister works as a {job} at {university} in {city}.",
    "Is the {device} available in {country} yet?",
    "I speak {language} at home and {language#2} at work.",
    "Our backend is written in {programming_language}, the mobile app in {programming_language#2}.",
    "The doctor in {city} prescribed {drug} for my {disease}.",
]
HEADLINE = [
    "{company} to cut jobs in {city} as profits fall",
    "{person} wins {event}",
    "{band} announce tour with stops in {city} and {city#2}",
    "{country} votes as {party} leads polls",
    "{film} tops box office in {country}",
    "{team} sign {person} from {team#2}",
]
FILLER = [
    "It was a long day.", "Nobody expected that.", "More details will follow.", "The weather was awful.",
    "Thanks to everyone who helped!", "The Board will meet again next month.", "Prices went up again.",
    "The President did not comment.", "Happy New Year to all!", "Read more on our Blog.", "LOL.",
    "The Committee has not decided yet.", "That's all for Today.", "What a Game.", "God bless.",
    "The CEO was not available.", "Sources said the talks continue.", "Stay tuned.",
]
STYLE_TEMPLATES = [(NEWS, 0.38), (SOCIAL, 0.22), (REVIEW, 0.1), (DIALOGUE, 0.16), (HEADLINE, 0.14)]

# relation name aliases (first is canonical) -> (head kinds, tail kinds, phrasings with {h} {t})
RELATIONS: Dict[str, Tuple[Tuple[str, ...], Tuple[str, ...], List[str]]] = {
    "works for": (("person",), ("company", "agency", "university", "media"), [
        "{h} works for {t}.", "{h}, a spokesman for {t}, declined to comment.", "{t} hired {h} as its new {job}.",
        "{h} has been with {t} for years.", "\"We are pleased,\" said {h} of {t}.", "{h}, an analyst at {t}, said demand fell."]),
    "lives in": (("person",), ("city", "country", "region"), [
        "{h} lives in {t}.", "{h}, who lives in {t}, was not hurt.", "{h} moved to {t} last year.",
        "{h} now makes her home in {t}.", "{h} of {t} told reporters the plan would fail."]),
    "organization based in": (("company", "agency", "university", "team", "media", "party"), ("city", "country", "region"), [
        "{h} is based in {t}.", "{t}-based {h} reported a loss.", "{h}, headquartered in {t}, said sales rose.",
        "{h} of {t} announced new rules.", "The {t} office of {h} will close."]),
    "located in": (("city", "landmark", "region"), ("country", "region", "city"), [
        "{h} is located in {t}.", "{h}, {t}, was hit by the storm.", "the town of {h} in {t}",
        "{h} lies in the north of {t}.", "Tourists visited {h} in {t}."]),
    "kill": (("person",), ("person",), [
        "{h} killed {t}.", "{h} was convicted of killing {t}.", "{t} was shot dead by {h}.",
        "{h} is accused of murdering {t}."]),
    "born in": (("person",), ("city", "country"), ["{h} was born in {t}.", "Born in {t}, {h} studied law.", "{h}, a native of {t}, returned home."]),
    "founded": (("person",), ("company", "band", "party"), ["{h} founded {t}.", "{t} was founded by {h}.", "{h} started {t} in 2004."]),
    "member of": (("person",), ("band", "team", "party"), ["{h} plays for {t}.", "{h} of {t} sang the opening song.", "{h} joined {t} in the spring."]),
    "made by": (("device", "vehicle", "software"), ("company",), ["{h} is made by {t}.", "{t} released the {h} on Friday.", "{t}'s new {h} sold out."]),
    "directed by": (("film", "tv_show"), ("person",), ["{h} was directed by {t}.", "{t} directed {h}.", "{t}'s {h} opens next week."]),
    "written by": (("book", "song"), ("person",), ["{h} was written by {t}.", "{t} wrote {h}.", "{h}, the latest by {t}, is out now."]),
    "studied at": (("person",), ("university",), ["{h} studied at {t}.", "{h} graduated from {t}."]),
}
RELATION_ALIASES: Dict[str, List[str]] = {
    "works for": ["works for", "works_for", "employed by", "employee of"],
    "lives in": ["lives in", "lives_in", "resides in", "residence"],
    "organization based in": ["organization based in", "based in", "headquartered in"],
    "located in": ["located in", "located_in", "part of"],
    "kill": ["kill", "killed", "murdered"],
    "born in": ["born in", "born_in", "birthplace"],
    "founded": ["founded", "founder of"],
    "member of": ["member of", "member_of"],
    "made by": ["made by", "manufacturer", "produced by"],
    "directed by": ["directed by", "director"],
    "written by": ["written by", "author"],
    "studied at": ["studied at", "alumnus of"],
}

_WORLDS: Dict[int, World] = {}


def world(seed: int) -> World:
    if seed not in _WORLDS:
        _WORLDS[seed] = World(seed)
    return _WORLDS[seed]


Piece = Tuple[str, Optional[str]]  # (text, kind or None)


def _pieces(template: str, w: World, r: random.Random, fixed: Optional[Dict[str, str]] = None) -> Tuple[List[Piece], Dict[str, str]]:
    """Splits a template into text and slot pieces, drawing one value per slot (distinct per text)."""
    out: List[Piece] = []
    values: Dict[str, str] = dict(fixed or {})
    i = 0
    while i < len(template):
        j = template.find("{", i)
        if j < 0:
            out.append((template[i:], None))
            break
        if j > i:
            out.append((template[i:j], None))
        k = template.index("}", j)
        key = template[j + 1:k]
        kind = key.split("#")[0]
        if key not in values:
            v = w.value(kind, r)
            for _ in range(6):
                if v not in values.values():
                    break
                v = w.value(kind, r)
            values[key] = v
        out.append((values[key], kind))
        i = k + 1
    return out, values


def _style(pieces: List[Piece], r: random.Random, social: bool) -> List[Piece]:
    """Casing and decorations of real text; each piece is changed alone so mention strings stay exact."""
    p = r.random()
    case = "lower" if p < (0.45 if social else 0.08) else "title" if p < (0.5 if social else 0.14) else "upper" if p < (0.5 if social else 0.16) else None

    def change(s: str) -> str:
        if case == "lower":
            t = s.lower()
        elif case == "title":
            t = " ".join(x[:1].upper() + x[1:] for x in s.split(" "))
        elif case == "upper":
            t = s.upper()
        else:
            return s
        return t if len(t) == len(s) else s

    out = [(change(s), k) for s, k in pieces]
    if social and r.random() < 0.6:
        w = r.choice(["@" + r.choice(["mike", "jen", "the", "real", "its"]) + r.choice(["_", "", "x"]) + str(r.randint(1, 999)),
                      "RT @" + r.choice(["news", "daily", "fan", "music"]) + str(r.randint(1, 99)) + ":"])
        out.insert(0, (w + " ", None))
    if social and r.random() < 0.5:
        out.append((" " + r.choice(["#tbt", "#love", "#news", "#blessed", "#fail", "#mondays", "http://t.co/" + str(r.randint(10000, 99999)),
                                    "lol", ":)", "😂", "&amp; more", "#" + r.choice(["goals", "music", "travel"])]), None))
    return out


def _text(pieces: List[Piece]) -> str:
    return "".join(s for s, _ in pieces)


def _choose_labels(kinds_present: List[str], r: random.Random) -> Dict[str, Tuple[str, ...]]:
    """A prompt: labels -> kinds, never two labels sharing a kind."""
    if r.random() < 0.2:
        scheme = dict(r.choice(SCHEMES))
        if len(scheme) > 3 and r.random() < 0.5:  # often a part of a scheme (fewer absent labels)
            keep = r.sample(sorted(scheme), k=r.randint(2, len(scheme)))
            scheme = {k: scheme[k] for k in keep}
        return scheme
    chosen: Dict[str, Tuple[str, ...]] = {}
    covered: set = set()
    order = list(dict.fromkeys(kinds_present))
    r.shuffle(order)
    for kind in order:
        if kind in covered:
            continue
        options = [lab for lab in sorted(LABELS) if kind in LABELS[lab] and not covered.intersection(LABELS[lab])]
        if not options:
            continue
        lab = r.choice(options)
        chosen[lab] = LABELS[lab]
        covered.update(LABELS[lab])
    if len(chosen) > 1 and r.random() < 0.25:  # ask for less than the text holds
        chosen.pop(r.choice(sorted(chosen)))
        covered = set(k for v in chosen.values() for k in v)
    absent = [lab for lab in sorted(LABELS) if not covered.intersection(LABELS[lab]) and not set(kinds_present).intersection(LABELS[lab])]
    for lab in r.sample(absent, k=min(len(absent), r.randint(0, 2))):
        if not covered.intersection(LABELS[lab]):
            chosen[lab] = LABELS[lab]
            covered.update(LABELS[lab])
    return chosen


def _entities(pieces: List[Piece], labels: Dict[str, Tuple[str, ...]]) -> Dict[str, List[str]]:
    ents: Dict[str, List[str]] = {lab: [] for lab in labels}
    for s, kind in pieces:
        if kind is None:
            continue
        for lab, kinds in labels.items():
            if kind in kinds and s not in ents[lab]:
                ents[lab].append(s)
    return ents


def gen_entities(g) -> Dict[str, Any]:
    """A realistic text with its entities under a prompt of labels (``g``: synthetic.Gen, for its rng)."""
    r: random.Random = g.r
    w = world(0)
    group = r.choices([t for t, _ in STYLE_TEMPLATES], weights=[p for _, p in STYLE_TEMPLATES], k=1)[0]
    pieces, _ = _pieces(r.choice(group), w, r)
    if group is not SOCIAL and r.random() < 0.3:
        more, _ = _pieces(r.choice(group), w, r)
        pieces = pieces + [(". " if group is HEADLINE else " ", None)] + more
    if r.random() < 0.25:
        filler = (r.choice(FILLER), None)
        pieces = [filler, (" ", None)] + pieces if r.random() < 0.5 else pieces + [(" ", None), filler]
    pieces = _style(pieces, r, social=group is SOCIAL)
    kinds = [k for _, k in pieces if k]
    labels = _choose_labels(kinds, r)
    keys = list(labels)
    r.shuffle(keys)
    ents = _entities(pieces, labels)
    out: Dict[str, Any] = {"entities": {k: ents[k] for k in keys}}
    if r.random() < 0.2:
        out["entity_descriptions"] = {k: DESCRIPTIONS[k] for k in keys if k in DESCRIPTIONS}
    return {"input": _text(pieces).strip(), "output": out}


def gen_relation(g) -> Dict[str, Any]:
    """One to three relation facts in realistic phrasing, optionally with the entity prompt too."""
    r: random.Random = g.r
    w = world(0)
    names = r.sample(sorted(RELATIONS), k=r.choice((1, 1, 2, 3)))
    pieces: List[Piece] = []
    rels = []
    for name in names:
        hk, tk, phrasings = RELATIONS[name]
        head_kind, tail_kind = r.choice(hk), r.choice(tk)
        h, t = w.value(head_kind, r), w.value(tail_kind, r)
        if h == t:
            continue
        tpl = r.choice(phrasings)
        tpl = tpl.replace("{h}", "{" + head_kind + "#h}").replace("{t}", "{" + tail_kind + "#t}")
        part, _ = _pieces(tpl, w, r, fixed={f"{head_kind}#h": h, f"{tail_kind}#t": t})
        if pieces:
            pieces.append((" ", None))
        pieces.extend(part)
        alias = RELATION_ALIASES[name][0] if r.random() < 0.6 else r.choice(RELATION_ALIASES[name])
        rels.append({alias: {"head": h, "tail": t}})
    if not rels:
        return gen_entities(g)
    out: Dict[str, Any] = {"relations": rels}
    if r.random() < 0.5:
        kinds = [k for _, k in pieces if k]
        out["entities"] = _entities(pieces, _choose_labels(kinds, r))
    return {"input": _text(pieces).strip(), "output": out}
