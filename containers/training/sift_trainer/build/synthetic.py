"""Synthetic labelled data for pre-training the GLiNER2 heads of ``sift/gliner2-mini-v1``.

Everything here is written by us: vocabularies, sentence templates and generators for the four
head types (entities, classification, json structures, relations). The goal is not world
knowledge but teaching the heads what a *label prompt* means: the same surface value appears
under different label names (synonyms), entity types are sampled with distractor (absent)
labels, label order is shuffled, structures have one to three instances, relations mix
directions. The generator is deterministic for a given seed.

Output rows are in the gliner2 native training format::

    {"input": text, "output": {"entities": {...}, "classifications": [...],
                               "json_structures": [...], "relations": [...]}}

``to_sift_rows`` converts them to the service's dataset row format (DESIGN.md §3) for tests.
"""

from __future__ import annotations

import random
from typing import Any, Dict, List, Optional, Tuple

# ---------------------------------------------------------------------------
# Vocabularies (invented or generic values; no external data)
# ---------------------------------------------------------------------------

FIRST = ["Alice", "Bob", "Carla", "David", "Elena", "Farid", "Grace", "Hiro", "Ines", "Jamal", "Keiko",
         "Liam", "Maria", "Nikolai", "Olga", "Pedro", "Quinn", "Rosa", "Samir", "Tara", "Umar", "Vera",
         "Wei", "Ximena", "Yusuf", "Zoe", "Anton", "Beatrix", "Chen", "Dmitri", "Emma", "Felix", "Hannah",
         "Ivan", "Julia", "Kofi", "Lena", "Mateo", "Nadia", "Oscar", "Priya", "Rafael", "Sofia", "Tomas"]
LAST = ["Smith", "Garcia", "Okafor", "Tanaka", "Novak", "Schmidt", "Rossi", "Kowalski", "Nguyen", "Haddad",
        "Johansson", "Moreau", "Silva", "Ivanova", "Kim", "Patel", "Murphy", "Fischer", "Costa", "Larsen",
        "Mendes", "Dubois", "Yamamoto", "Petrov", "Bakker", "Hughes", "Alvarez", "Berg", "Cohen", "Duarte"]
COMPANY_A = ["Acme", "Globex", "Initech", "Umbrella", "Hooli", "Vandelay", "Stark", "Wayne", "Tyrell", "Cyberdyne",
             "Nimbus", "Aperture", "Soylent", "Pied Piper", "Blue Harbor", "Northwind", "Contoso", "Fabrikam",
             "Zenith", "Orbital", "Quantum Leaf", "Redwood", "Silverline", "Helios", "Brightpath"]
COMPANY_B = ["Inc", "Corp", "Labs", "Systems", "Group", "Technologies", "Bank", "Foods", "Motors", "Energy",
             "Pharma", "Airlines", "Media", ""]
CITY = ["Paris", "Berlin", "Tokyo", "Lagos", "Lima", "Toronto", "Madrid", "Seoul", "Nairobi", "Oslo", "Denver",
        "Chicago", "Mumbai", "Cairo", "Sydney", "Dublin", "Vienna", "Prague", "Boston", "Austin", "Lisbon",
        "Warsaw", "Istanbul", "Bogota", "Manila", "Helsinki", "Zurich", "Seattle", "Hamburg", "Osaka"]
COUNTRY = ["France", "Germany", "Japan", "Nigeria", "Peru", "Canada", "Spain", "Korea", "Kenya", "Norway",
           "Brazil", "India", "Egypt", "Australia", "Ireland", "Austria", "Poland", "Mexico", "Chile", "Italy"]
MONTH = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
         "November", "December"]
PRODUCT = ["Model X9 phone", "AeroBook laptop", "Pulse smartwatch", "Nova headphones", "Zephyr drone",
           "Orion tablet", "Lumen desk lamp", "Vertex router", "Echo speaker", "Titan backpack",
           "Glide scooter", "Atlas camera", "Comet e-reader", "Frost blender", "Summit tent"]
COLOR = ["red", "blue", "green", "black", "white", "silver", "gold", "purple", "orange", "grey"]
JOB = ["engineer", "nurse", "teacher", "accountant", "designer", "pilot", "lawyer", "chef", "architect",
       "pharmacist", "data scientist", "journalist", "electrician", "professor", "dentist"]
UNIVERSITY = ["University of Lakeside", "Northfield Institute", "Riverside College", "Eastgate University",
              "Westbrook Polytechnic", "Summit State University"]
DRUG = ["ibuprofen", "amoxicillin", "metformin", "lisinopril", "atorvastatin", "omeprazole", "paracetamol"]
DISEASE = ["diabetes", "asthma", "migraine", "influenza", "hypertension", "pneumonia", "arthritis"]
LANG = ["Python", "Rust", "Java", "TypeScript", "Go", "Kotlin", "Haskell", "Ruby", "Swift", "Elixir"]
TEAM = ["Red Falcons", "Blue Sharks", "Golden Bears", "Iron Wolves", "Silver Foxes", "Night Owls"]
EVENT = ["Tech Summit", "Harvest Festival", "Winter Marathon", "Jazz Week", "Film Gala", "Robotics Expo"]
AIRLINE = ["SkyJet", "AeroNova", "Polar Air", "Sunwing Express", "BlueCrest Airways"]
STREET = ["Maple Street", "Oak Avenue", "Harbor Road", "King Street", "Elm Lane", "River Drive"]
CURRENCY_SYM = ["$", "€", "£"]

# Entity types -> label synonyms used in prompts (first is canonical).
ENTITY_LABELS: Dict[str, List[str]] = {
    "person": ["person", "people", "person name", "name", "individual", "human"],
    "company": ["company", "organization", "organisation", "business", "firm", "corporation"],
    "city": ["city", "location", "place", "town"],
    "country": ["country", "nation", "location", "place"],
    "date": ["date", "day", "time expression"],
    "money": ["money", "amount", "price", "monetary value", "cost"],
    "product": ["product", "device", "item", "gadget"],
    "email": ["email", "email address", "e-mail"],
    "phone": ["phone number", "phone", "telephone number"],
    "job": ["job title", "occupation", "profession", "role"],
    "university": ["university", "school", "educational institution", "organization"],
    "drug": ["drug", "medication", "medicine"],
    "disease": ["disease", "medical condition", "illness"],
    "language": ["programming language", "language", "technology"],
    "team": ["sports team", "team", "club"],
    "event": ["event", "festival", "conference"],
    "color": ["color", "colour"],
    "percent": ["percentage", "percent", "rate"],
}

DESCRIPTIONS: Dict[str, str] = {
    "person": "names of people",
    "company": "names of companies and businesses",
    "city": "names of cities",
    "country": "names of countries",
    "date": "calendar dates",
    "money": "amounts of money with currency",
    "product": "names of commercial products",
    "email": "email addresses",
    "phone": "telephone numbers",
    "job": "job titles or occupations",
    "university": "names of universities",
    "drug": "names of medications",
    "disease": "names of diseases",
    "language": "programming languages",
    "team": "names of sports teams",
    "event": "names of events",
    "color": "colors",
    "percent": "percentages",
}


class Gen:
    """Value generators bound to one random stream."""

    def __init__(self, rng: random.Random):
        self.r = rng

    def person(self) -> str:
        if self.r.random() < 0.15:
            return self.r.choice(FIRST)
        return f"{self.r.choice(FIRST)} {self.r.choice(LAST)}"

    def company(self) -> str:
        suffix = self.r.choice(COMPANY_B)
        return f"{self.r.choice(COMPANY_A)} {suffix}".strip()

    def city(self) -> str:
        return self.r.choice(CITY)

    def country(self) -> str:
        return self.r.choice(COUNTRY)

    def date(self) -> str:
        d = self.r.randint(1, 28)
        m = self.r.choice(MONTH)
        y = self.r.randint(1990, 2030)
        return self.r.choice([f"{m} {d}, {y}", f"{d} {m} {y}", f"{m} {d}", f"{y}-{self.r.randint(1, 12):02d}-{d:02d}"])

    def money(self) -> str:
        amount = self.r.choice([self.r.randint(2, 99), self.r.randint(100, 9999), self.r.randint(10, 500) * 1000])
        if self.r.random() < 0.5:
            return f"{self.r.choice(CURRENCY_SYM)}{amount:,}"
        return f"{amount:,} {self.r.choice(['dollars', 'euros', 'USD', 'EUR', 'pounds'])}"

    def product(self) -> str:
        return self.r.choice(PRODUCT)

    def email(self, name: Optional[str] = None) -> str:
        base = (name or self.person()).lower().replace(" ", ".")
        return f"{base}@{self.r.choice(['example.com', 'mail.org', 'corp.net', 'acme.io'])}"

    def phone(self) -> str:
        return self.r.choice([
            f"+{self.r.randint(1, 49)} {self.r.randint(100, 999)} {self.r.randint(100, 999)} {self.r.randint(1000, 9999)}",
            f"({self.r.randint(200, 999)}) {self.r.randint(200, 999)}-{self.r.randint(1000, 9999)}",
            f"{self.r.randint(200, 999)}-{self.r.randint(200, 999)}-{self.r.randint(1000, 9999)}",
        ])

    def job(self) -> str:
        return self.r.choice(JOB)

    def university(self) -> str:
        return self.r.choice(UNIVERSITY)

    def drug(self) -> str:
        return self.r.choice(DRUG)

    def disease(self) -> str:
        return self.r.choice(DISEASE)

    def language(self) -> str:
        return self.r.choice(LANG)

    def team(self) -> str:
        return self.r.choice(TEAM)

    def event(self) -> str:
        return self.r.choice(EVENT)

    def color(self) -> str:
        return self.r.choice(COLOR)

    def percent(self) -> str:
        return f"{self.r.randint(1, 99)}%"

    def value(self, etype: str) -> str:
        return getattr(self, etype)()


# ---------------------------------------------------------------------------
# Entity templates: {type} or {type#n} slots
# ---------------------------------------------------------------------------

NER_TEMPLATES = [
    "{person} joined {company} as a {job} in {city} on {date}.",
    "{person} was born in {city}, {country}, and studied at {university}.",
    "{company} announced that revenue grew by {percent} to {money} last quarter.",
    "Contact {person} at {email} or call {phone} before {date}.",
    "The {product} from {company} costs {money} and ships in {color}.",
    "Doctors in {city} prescribed {drug} to patients with {disease}.",
    "{person} wrote the new service in {language} while working for {company}.",
    "The {team} beat the {team#2} in {city} on {date}.",
    "Tickets for the {event} in {city} start at {money}.",
    "{person#1} met {person#2} at the {event} in {country}.",
    "After leaving {company}, {person} became a {job} at {company#2}.",
    "Our {product} order from {company} arrived in {city} on {date}.",
    "{person}, a {job} from {city}, takes {drug} for {disease}.",
    "{company} opened a new office in {city}, {country}, hiring {person} as CEO.",
    "Please send the invoice of {money} to {email} by {date}.",
    "Researchers at {university} found that {drug} reduced {disease} symptoms by {percent}.",
    "{person} prefers {language} over {language#2} for backend work.",
    "The {color} {product} is sold out in {country}.",
    "I spoke with {person} from {company} yesterday about the {product}.",
    "Flights from {city} to {city#2} were cancelled on {date} due to storms.",
    "{team} fans gathered in {city} to celebrate the title.",
    "Call me at {phone} if {person} cannot make it to {city}.",
    "{company} shares fell {percent} after the {event}.",
    "The {job} {person} moved to {country} in {date}.",
]

CLASS_TASKS: Dict[str, Dict[str, List[str]]] = {
    "sentiment": {
        "positive": ["I absolutely love the {product}, it works perfectly.", "Great service from {company}, very happy!",
                     "The trip to {city} was wonderful and the staff were kind.", "Fantastic experience, I would recommend {company} to anyone.",
                     "{person} did an excellent job, thank you so much."],
        "negative": ["The {product} broke after two days, terrible quality.", "Worst customer support ever at {company}.",
                     "I am very disappointed with my stay in {city}.", "{company} charged me twice and never answered, awful.",
                     "The delivery was late and the box was damaged. Never again."],
        "neutral": ["The {product} arrived on {date}.", "{company} has an office in {city}.",
                    "The meeting with {person} is scheduled for {date}.", "I ordered the {product} from {company} last week.",
                    "The store in {city} opens at nine."],
    },
    "topic": {
        "sports": ["The {team} won the championship after a late goal.", "{person} broke the marathon record in {city}.",
                   "The coach of the {team} praised the defense."],
        "technology": ["{company} released a new {product} with a faster chip.", "Developers are moving from {language} to {language#2}.",
                       "The update improves battery life of the {product}."],
        "business": ["{company} reported profits of {money} this quarter.", "Shares of {company} rose {percent} after the merger.",
                     "{company} plans to hire 500 people in {city}."],
        "health": ["Doctors recommend {drug} for mild {disease}.", "A new study links sleep to lower risk of {disease}.",
                   "The hospital in {city} opened a new {disease} clinic."],
        "politics": ["The parliament of {country} passed a new budget law.", "The mayor of {city} announced new elections.",
                     "Leaders from {country} and {country#2} signed a trade treaty."],
        "entertainment": ["The {event} in {city} sold out in minutes.", "{person} stars in a new comedy film.",
                          "The band announced a world tour starting in {city}."],
    },
    "intent": {
        "book_flight": ["I need a flight from {city} to {city#2} on {date}.", "Book me a seat to {city} next Friday.",
                        "Can you find flights to {country} for two adults?"],
        "cancel_order": ["Please cancel my order for the {product}.", "I want to cancel the {product} I bought yesterday.",
                         "Stop my order from {company}, I changed my mind."],
        "check_balance": ["What is the balance on my account?", "How much money do I have left?",
                          "Show me my current account balance please."],
        "report_lost_card": ["I lost my credit card in {city}.", "My card was stolen, please block it.",
                             "I cannot find my debit card anywhere."],
        "track_package": ["Where is my package from {company}?", "Track the delivery of my {product}.",
                          "My parcel has not arrived yet, where is it?"],
    },
    "urgency": {
        "urgent": ["The server is down and customers cannot pay, fix it now!", "Emergency: water is leaking into the office.",
                   "We need the contract signed today or we lose the deal."],
        "not urgent": ["Whenever you have time, could you review the slides?", "No rush, but the printer is a bit slow.",
                       "Let's discuss the {product} roadmap next month."],
    },
}

# Multi-label: aspects of a review
ASPECTS = {
    "price": ["The price of {money} is too high.", "It was cheap for what you get.", "Good value for {money}."],
    "quality": ["The build quality is solid.", "It feels flimsy and cheap.", "The materials are premium."],
    "delivery": ["Shipping took three weeks.", "It arrived a day early.", "The courier lost my package twice."],
    "support": ["Support answered within minutes.", "Nobody from {company} replied to my emails.", "The help desk was friendly."],
    "battery": ["The battery lasts two days.", "Battery life is disappointing.", "It charges very quickly."],
}

STRUCT_TEMPLATES = [
    # name, fields (name, dtype, type), one-instance template, joiner for more instances
    ("order", [("item", "str", "product"), ("quantity", "str", "qty"), ("price", "str", "money")],
     "{qty} {product} for {money}"),
    ("contact", [("name", "str", "person"), ("email", "str", "email"), ("phone", "str", "phone")],
     "{person} ({email}, {phone})"),
    ("employee", [("name", "str", "person"), ("title", "str", "job"), ("employer", "str", "company")],
     "{person} works as a {job} at {company}"),
    ("flight", [("origin", "str", "city"), ("destination", "str", "city#2"), ("date", "str", "date"), ("airline", "str", "airline")],
     "a {airline} flight from {city} to {city#2} on {date}"),
    ("product", [("name", "str", "product"), ("price", "str", "money"), ("colors", "list", "color+")],
     "the {product} costs {money} and comes in {color+}"),
    ("prescription", [("drug", "str", "drug"), ("condition", "str", "disease"), ("patient", "str", "person")],
     "{person} was given {drug} for {disease}"),
    ("address", [("street", "str", "street"), ("city", "str", "city"), ("country", "str", "country")],
     "{num} {street}, {city}, {country}"),
    ("meeting", [("attendees", "list", "person+"), ("date", "str", "date"), ("location", "str", "city")],
     "a meeting with {person+} in {city} on {date}"),
]
STRUCT_PREFIX = ["Summary: ", "Record: ", "Note: ", "", "Details - ", "Log: "]
STRUCT_JOIN = ["; ", ". Also ", ", and ", ". Then "]

RELATION_TEMPLATES = [
    ("works_for", "person", "company", ["{h} works for {t}.", "{h} is an employee of {t}.", "{t} hired {h} last year.", "{h}, who works at {t}, spoke today."]),
    ("lives_in", "person", "city", ["{h} lives in {t}.", "{h} moved to {t} in the spring.", "{t} is home to {h}."]),
    ("founded", "person", "company", ["{h} founded {t}.", "{t} was founded by {h}.", "{h} started {t} in a garage."]),
    ("headquartered_in", "company", "city", ["{h} is headquartered in {t}.", "{h} has its main office in {t}.", "The head office of {h} is in {t}."]),
    ("born_in", "person", "country", ["{h} was born in {t}.", "{h} is a native of {t}."]),
    ("studied_at", "person", "university", ["{h} studied at {t}.", "{h} graduated from {t}."]),
    ("treats", "drug", "disease", ["{h} treats {t}.", "{h} is used against {t}."]),
]
RELATION_ALIASES = {
    "works_for": ["works_for", "works for", "employed by", "employer"],
    "lives_in": ["lives_in", "lives in", "residence"],
    "founded": ["founded", "founder of", "founded by"],
    "headquartered_in": ["headquartered_in", "headquartered in", "located in"],
    "born_in": ["born_in", "born in", "birthplace"],
    "studied_at": ["studied_at", "studied at", "alumnus of"],
    "treats": ["treats", "used to treat", "treatment for"],
}

_FILL_CACHE: Dict[str, str] = {}


def _fill(template: str, g: Gen) -> Tuple[str, Dict[str, List[Tuple[str, str]]]]:
    """Fill ``{type}`` / ``{type#n}`` slots; return text and slot->(type, value) for each filled slot."""
    out = []
    slots: Dict[str, Tuple[str, str]] = {}
    i = 0
    while i < len(template):
        j = template.find("{", i)
        if j < 0:
            out.append(template[i:])
            break
        out.append(template[i:j])
        k = template.index("}", j)
        key = template[j + 1:k]
        if key not in slots:
            etype = key.split("#")[0]
            if etype == "qty":
                val = str(g.r.randint(1, 12))
            elif etype == "num":
                val = str(g.r.randint(1, 250))
            elif etype == "airline":
                val = g.r.choice(AIRLINE)
            elif etype == "street":
                val = g.r.choice(STREET)
            else:
                val = g.value(etype)
                # keep slot values of the same type distinct within one text
                for _ in range(5):
                    if any(v == val for (t, v) in slots.values()):
                        val = g.value(etype)
            slots[key] = (etype, val)
        out.append(slots[key][1])
        i = k + 1
    return "".join(out), slots


def _label_for(etype: str, g: Gen, synonyms: bool) -> str:
    names = ENTITY_LABELS[etype]
    if not synonyms or g.r.random() < 0.55:
        return names[0]
    return g.r.choice(names)


def gen_entities(g: Gen) -> Dict[str, Any]:
    tpl = g.r.choice(NER_TEMPLATES)
    text, slots = _fill(tpl, g)
    types_present = sorted({t for (t, _) in slots.values()})
    # one label name per type for this example; avoid two types sharing a synonym
    used: Dict[str, str] = {}
    for t in types_present:
        for _ in range(4):
            lab = _label_for(t, g, synonyms=True)
            if lab not in used.values():
                break
        else:
            lab = ENTITY_LABELS[t][0]
        used[t] = lab
    ents: Dict[str, List[str]] = {used[t]: [] for t in types_present}
    for (t, v) in slots.values():
        if v not in ents[used[t]]:
            ents[used[t]].append(v)
    # sometimes drop a present type from the prompt (teaches: only extract what is asked)
    if len(ents) > 1 and g.r.random() < 0.3:
        drop = g.r.choice(list(ents))
        ents.pop(drop)
    # distractor labels (absent types)
    absent = [t for t in ENTITY_LABELS if t not in types_present]
    for t in g.r.sample(absent, k=g.r.randint(0, 3)):
        lab = ENTITY_LABELS[t][0]
        if lab not in ents and lab not in used.values():
            ents[lab] = []
    keys = list(ents)
    g.r.shuffle(keys)
    out: Dict[str, Any] = {"entities": {k: ents[k] for k in keys}}
    if g.r.random() < 0.25:
        inv = {v: k for k, v in used.items()}
        out["entity_descriptions"] = {k: DESCRIPTIONS[inv.get(k, k)] for k in keys if inv.get(k, k) in DESCRIPTIONS}
    return {"input": text, "output": out}


def gen_classification(g: Gen) -> Dict[str, Any]:
    if g.r.random() < 0.2:
        # multi-label aspects
        k = g.r.randint(1, 3)
        chosen = g.r.sample(sorted(ASPECTS), k=k)
        parts = []
        for a in chosen:
            t, _ = _fill(g.r.choice(ASPECTS[a]), g)
            parts.append(t)
        text = " ".join(parts)
        labels = sorted(ASPECTS)
        g.r.shuffle(labels)
        return {"input": text, "output": {"classifications": [
            {"task": "aspects" if g.r.random() < 0.6 else "classification", "labels": labels, "true_label": chosen, "multi_label": True}]}}
    task = g.r.choice(sorted(CLASS_TASKS))
    label = g.r.choice(sorted(CLASS_TASKS[task]))
    text, _ = _fill(g.r.choice(CLASS_TASKS[task][label]), g)
    labels = sorted(CLASS_TASKS[task])
    g.r.shuffle(labels)
    # Sift names the head of a label/labels dataset "classification": teach that name too
    task_name = task if g.r.random() < 0.6 else g.r.choice(["classification", "classification", "category", "label", task])
    return {"input": text, "output": {"classifications": [
        {"task": task_name, "labels": labels, "true_label": [label]}]}}


def _fill_struct(pattern: str, fields, g: Gen) -> Tuple[str, Dict[str, Any]]:
    """Fill a structure pattern; '+' slots become lists of 1-3 values joined naturally."""
    values: Dict[str, Any] = {}
    text = pattern
    for fname, dtype, slot in fields:
        if slot.endswith("+"):
            etype = slot[:-1]
            n = g.r.randint(1, 3)
            vals: List[str] = []
            for _ in range(n * 3):
                v = g.value(etype)
                if v not in vals:
                    vals.append(v)
                if len(vals) == n:
                    break
            joined = vals[0] if len(vals) == 1 else ", ".join(vals[:-1]) + " and " + vals[-1]
            text = text.replace("{" + slot + "}", joined)
            values[fname] = vals
    filled, slots = _fill(text, g)
    for fname, dtype, slot in fields:
        if slot.endswith("+"):
            continue
        values[fname] = slots[slot][1]
    return filled, values


def gen_structure(g: Gen) -> Dict[str, Any]:
    name, fields, pattern = g.r.choice(STRUCT_TEMPLATES)
    n = 1 if g.r.random() < 0.55 else g.r.randint(2, 3)
    parts = []
    instances = []
    for _ in range(n):
        t, vals = _fill_struct(pattern, fields, g)
        parts.append(t)
        instances.append({name: vals})
    text = g.r.choice(STRUCT_PREFIX) + g.r.choice(STRUCT_JOIN).join(parts) + "."
    text = text[0].upper() + text[1:]
    # ask for a subset of the fields sometimes (the schema is then smaller; values stay correct)
    if len(fields) > 2 and g.r.random() < 0.2:
        f = g.r.choice(fields)[0]
        for inst in instances:
            inst[name].pop(f, None)
    return {"input": text, "output": {"json_structures": instances}}


def gen_relation(g: Gen) -> Dict[str, Any]:
    k = 1 if g.r.random() < 0.6 else 2
    chosen = g.r.sample(RELATION_TEMPLATES, k=k)
    sentences = []
    rels = []
    ents: Dict[str, List[str]] = {}
    for rname, ht, tt, tpls in chosen:
        h = g.value(ht)
        t = g.value(tt)
        if h == t:
            continue
        sentences.append(g.r.choice(tpls).format(h=h, t=t))
        alias = RELATION_ALIASES[rname][0] if g.r.random() < 0.6 else g.r.choice(RELATION_ALIASES[rname])
        rels.append({alias: {"head": h, "tail": t}})
        ents.setdefault(ENTITY_LABELS[ht][0], []).append(h)
        ents.setdefault(ENTITY_LABELS[tt][0], []).append(t)
    text = " ".join(sentences)
    out: Dict[str, Any] = {"relations": rels}
    if g.r.random() < 0.5:
        out["entities"] = {k2: sorted(set(v)) for k2, v in ents.items()}
    return {"input": text, "output": out}


def gen_mixed(g: Gen) -> Dict[str, Any]:
    """Entities + classification on one text (multi-head rows)."""
    ex = gen_entities(g)
    text = ex["input"]
    sentiment = g.r.choice(["positive", "negative", "neutral"])
    tail = {"positive": " Everyone was delighted.", "negative": " It was a total disaster.", "neutral": ""}[sentiment]
    ex["input"] = text + tail
    labels = ["positive", "negative", "neutral"]
    g.r.shuffle(labels)
    ex["output"]["classifications"] = [{"task": "sentiment", "labels": labels, "true_label": [sentiment]}]
    return ex


GENERATORS = [(gen_entities, 0.34), (gen_classification, 0.26), (gen_structure, 0.18), (gen_relation, 0.14), (gen_mixed, 0.08)]


# second build stage: the classifier learns slower than the span heads in the mixed stage
CLASSIFICATION_FOCUS = [(gen_entities, 0.2), (gen_classification, 0.5), (gen_structure, 0.12), (gen_relation, 0.1), (gen_mixed, 0.08)]


def generate(n: int, seed: int = 0, mixture=None) -> List[Dict[str, Any]]:
    """Generate ``n`` gliner2-format training records (deterministic for ``seed``)."""
    rng = random.Random(seed)
    g = Gen(rng)
    mixture = mixture or GENERATORS
    fns = [f for f, _ in mixture]
    weights = [w for _, w in mixture]
    out = []
    while len(out) < n:
        fn = rng.choices(fns, weights=weights, k=1)[0]
        rec = fn(g)
        if rec["input"].strip():
            out.append(rec)
    return out


def generate_task(task: str, n: int, seed: int = 0) -> List[Dict[str, Any]]:
    """Generate ``n`` records of one kind: entities | classification | structures | relations | mixed."""
    rng = random.Random(seed)
    g = Gen(rng)
    fn = {"entities": gen_entities, "classification": gen_classification, "structures": gen_structure,
          "relations": gen_relation, "mixed": gen_mixed}[task]
    return [fn(g) for _ in range(n)]


# ---------------------------------------------------------------------------
# Conversion to the service's dataset row format (DESIGN.md §3 "Training rows")
# ---------------------------------------------------------------------------

def to_sift_rows(records: List[Dict[str, Any]], classification: str = "label") -> List[Dict[str, Any]]:
    """gliner2 records -> Sift rows ({text, entities, label|labels, json_structures, relations})."""
    rows = []
    for rec in records:
        text = rec["input"]
        out = rec["output"]
        row: Dict[str, Any] = {"text": text}
        if "entities" in out:
            ents = []
            for lab, mentions in out["entities"].items():
                for m in mentions:
                    start = text.find(m)
                    if start >= 0:
                        ents.append({"text": m, "label": lab, "start": start, "end": start + len(m)})
            row["entities"] = ents
        for c in out.get("classifications", []):
            true = c["true_label"]
            if c.get("multi_label"):
                row["labels"] = list(true)
            elif classification == "label":
                row["label"] = true[0] if isinstance(true, list) else true
            break
        if "json_structures" in out:
            row["json_structures"] = [
                {name: {f: v for f, v in fields.items() if v not in ("", [])}}
                for inst in out["json_structures"] for name, fields in inst.items()
            ]
        if "relations" in out:
            row["relations"] = [
                {"relation": name, "head": v["head"], "tail": v["tail"]}
                for r in out["relations"] for name, v in r.items()
            ]
        rows.append(row)
    return rows
