"""Realistic entity values for the base-model build: a "world" of names drawn once per seed.

``synthetic.py``'s hand lists (44 first names, 25 companies, 30 cities) teach what a label prompt
means but let the model memorise surface forms; on real text it then finds little (zero-shot wnut17
F1 0.15). Here every kind of entity has hundreds to thousands of values: people, companies, cities,
regions and job titles from Faker's locale providers (PyPI ``faker``, MIT, pinned: its data ships in
the wheel, nothing is downloaded), and names we compose for the kinds Faker lacks (bands, teams,
films, songs, devices, apps, landmarks, agencies, events). Values are drawn into pools once, with
one seed per locale, so the build stays deterministic for a given Faker version (in the training
hash).
"""

from __future__ import annotations

import random
from typing import Dict, List

LOCALES = ("en_US", "en_GB", "de_DE", "fr_FR", "es_ES", "it_IT", "pt_BR", "nl_NL", "pl_PL", "sv_SE", "en_IN", "tr_TR")
# Faker's en_US cities are invented ("Lake Amandaton"); these locales list real place names.
REAL_CITY_LOCALES = ("de_DE", "fr_FR", "es_ES", "it_IT", "nl_NL", "pl_PL", "pt_BR", "en_IN", "tr_TR")

ADJ = ["Silent", "Broken", "Golden", "Hidden", "Last", "Little", "Midnight", "Wild", "Electric", "Lonely", "Crimson",
       "Frozen", "Endless", "Secret", "Burning", "Velvet", "Northern", "Lost", "Bright", "Hollow", "Savage", "Sweet",
       "Dark", "Blue", "Iron", "Paper", "Neon", "Rising", "Falling", "Quiet", "Strange", "Lucky", "Brave", "Royal",
       "Wicked", "Gentle", "Ancient", "Final", "Young", "Eternal"]
NOUN = ["River", "Kingdom", "Heart", "Shadow", "Garden", "Storm", "Road", "Dream", "Fire", "Mirror", "Ocean", "Harbor",
        "Empire", "Echo", "Winter", "Summer", "Sky", "Stone", "Machine", "Night", "Island", "City", "Crown", "Light",
        "Forest", "Letter", "Mountain", "Moon", "Train", "Song", "House", "Bridge", "Wolf", "Tiger", "Ghost", "Desert",
        "Garden", "Signal", "Circle", "Horizon"]
PLURAL = ["Wolves", "Tigers", "Hawks", "Rangers", "Giants", "Lions", "Pirates", "Kings", "Raiders", "Comets", "Rockets",
          "Panthers", "Eagles", "Sharks", "Bulls", "Falcons", "Warriors", "Stars", "Dragons", "Knights", "Owls",
          "Foxes", "Saints", "Vikings", "Ravens", "Strangers", "Monkeys", "Keys", "Lanterns", "Horses"]
SYLLABLE = ["zen", "tri", "nova", "lux", "vex", "kor", "ora", "mira", "tek", "plex", "quan", "sol", "vita", "zyn", "astra",
            "bel", "cor", "dyn", "fin", "gro", "hal", "ion", "jet", "kai", "lum", "mon", "nex", "opt", "pax", "ryx"]
FIELDS = ["Health", "Education", "Defence", "Finance", "Transport", "Agriculture", "Energy", "Justice", "Labour",
          "Foreign Affairs", "Environment", "Culture", "Trade", "Science", "Housing", "Tourism"]
SPORTS = ["Football", "Tennis", "Chess", "Swimming", "Cycling", "Rugby", "Basketball", "Athletics", "Hockey", "Esports"]
DEMONYMS = ["American", "British", "German", "French", "Spanish", "Italian", "Brazilian", "Dutch", "Polish", "Swedish",
            "Indian", "Turkish", "Chinese", "Japanese", "Korean", "Nigerian", "Kenyan", "Egyptian", "Mexican",
            "Canadian", "Australian", "Russian", "Ukrainian", "Irish", "Scottish", "Greek", "Portuguese", "Israeli",
            "Palestinian", "Iranian", "Iraqi", "Syrian", "Cuban", "Argentine", "Chilean", "Peruvian", "Vietnamese",
            "Thai", "Filipino", "Pakistani", "Afghan", "Norwegian", "Danish", "Finnish", "Swiss", "Austrian",
            "Catholic", "Muslim", "Jewish", "Christian", "Buddhist", "Hindu", "Protestant", "Democrat", "Republican",
            "European", "African", "Asian", "Latino", "Arab"]
WORLD_CITIES = ["London", "Paris", "New York", "Los Angeles", "Chicago", "Houston", "Toronto", "Vancouver", "Mexico City",
                "Sao Paulo", "Buenos Aires", "Lima", "Bogota", "Madrid", "Barcelona", "Rome", "Milan", "Berlin",
                "Munich", "Vienna", "Prague", "Warsaw", "Budapest", "Athens", "Istanbul", "Moscow", "Kyiv", "Cairo",
                "Lagos", "Nairobi", "Johannesburg", "Cape Town", "Dubai", "Tehran", "Baghdad", "Jerusalem", "Delhi",
                "Mumbai", "Karachi", "Dhaka", "Bangkok", "Jakarta", "Manila", "Beijing", "Shanghai", "Hong Kong",
                "Seoul", "Tokyo", "Osaka", "Sydney", "Melbourne", "Auckland", "Boston", "Seattle", "Atlanta", "Miami",
                "Dallas", "Denver", "Detroit", "Philadelphia", "Washington", "San Francisco", "Las Vegas", "Phoenix",
                "Dublin", "Edinburgh", "Manchester", "Liverpool", "Amsterdam", "Brussels", "Lisbon", "Stockholm",
                "Oslo", "Copenhagen", "Helsinki", "Zurich", "Geneva", "Havana", "Santiago", "Caracas", "Kabul",
                "Islamabad", "Singapore", "Kuala Lumpur", "Hanoi", "Taipei", "Ottawa", "Montreal", "Nashville",
                "New Orleans", "Austin", "Brooklyn", "Hollywood", "Oakland", "Portland", "Glasgow", "Belfast"]
REGIONS_EXTRA = ["California", "Texas", "Florida", "Ontario", "Quebec", "Bavaria", "Tuscany", "Catalonia", "Scotland",
                 "Wales", "Siberia", "Kashmir", "Punjab", "Gaza", "the West Bank", "Crimea", "Patagonia", "Normandy",
                 "Yorkshire", "Kent", "Queensland", "Alaska", "Hawaii", "Galicia", "Andalusia", "Lombardy"]
DEVICE_KIND = ["phone", "laptop", "tablet", "watch", "camera", "console", "headphones", "speaker", "router", "drone",
               "e-reader", "monitor", "keyboard", "earbuds", "TV"]
MODEL_SUFFIX = ["Pro", "Max", "Mini", "Air", "Ultra", "Plus", "Lite", "X", "S", "SE", "Neo", "Go"]
APP_SUFFIX = ["ly", "ify", "io", "Hub", "Chat", "Pay", "Maps", "Music", "Cloud", "Docs", "Studio", "Drive", "OS", "Go"]
EVENT_KIND = ["Festival", "Marathon", "Summit", "Expo", "Cup", "Open", "Awards", "Fair", "Conference", "Games", "Week",
              "Carnival", "Grand Prix", "Championship", "Biennale"]
LANDMARK_PATTERNS = ["{last} Bridge", "{city} Central Station", "{adj} Park", "Mount {last}", "Lake {first}",
                     "{first} River", "St. {first}'s Cathedral", "{city} International Airport", "{last} Stadium",
                     "{last} Memorial Hospital", "{city} Museum of Art", "{last} Square", "{adj} Tower",
                     "{last} Arena", "the {city} Opera House", "{first} Hall", "{last} Street", "{noun} Avenue"]
PROGRAMMING = ["Python", "Rust", "Java", "TypeScript", "Go", "Kotlin", "Haskell", "Ruby", "Swift", "Elixir", "C++", "Scala",
               "JavaScript", "PHP", "Perl", "Julia", "Lua", "Dart", "Zig", "OCaml"]
LANGUAGES = ["English", "Spanish", "French", "German", "Mandarin", "Arabic", "Hindi", "Portuguese", "Russian", "Japanese",
             "Swahili", "Turkish", "Italian", "Dutch", "Polish", "Korean", "Greek", "Hebrew", "Urdu", "Tamil"]
DRUGS = ["ibuprofen", "amoxicillin", "metformin", "lisinopril", "atorvastatin", "omeprazole", "paracetamol", "insulin",
         "aspirin", "prednisone", "sertraline", "warfarin", "ciprofloxacin", "albuterol", "levothyroxine", "morphine"]
DISEASES = ["diabetes", "asthma", "migraine", "influenza", "hypertension", "pneumonia", "arthritis", "malaria",
            "tuberculosis", "measles", "COVID-19", "bronchitis", "eczema", "depression", "epilepsy", "anemia",
            "Alzheimer's disease", "Parkinson's disease", "hepatitis B", "lung cancer"]


def _cap(word: str) -> str:
    return word[:1].upper() + word[1:]


class World:
    """Pools of entity values per kind, and a ``value(kind, rng)`` that draws one."""

    def __init__(self, seed: int, pool: int = 1500):
        from faker import Faker

        self.pools: Dict[str, List[str]] = {}
        fakers = {}
        for i, loc in enumerate(LOCALES):
            f = Faker(loc)
            f.seed_instance(seed * 1000 + i)
            fakers[loc] = f
        r = random.Random(seed)
        us = fakers["en_US"]

        def uniq(values) -> List[str]:
            seen: Dict[str, None] = {}
            for v in values:
                v = v.strip()
                if v and len(v) <= 48:
                    seen.setdefault(v)
            return list(seen)

        people = []
        for _ in range(pool):
            f = fakers[r.choice(LOCALES)]
            people.append(f"{f.first_name()} {f.last_name()}")
        self.pools["person_full"] = uniq(people)
        self.pools["first"] = uniq(fakers[r.choice(LOCALES)].first_name() for _ in range(pool))
        self.pools["last"] = uniq(fakers[r.choice(LOCALES)].last_name() for _ in range(pool))
        # Faker's company names are mostly surnames ("Jones-Lamb"), which teaches "a surname is a company":
        # a quarter of them, the rest composed brand names
        companies = [fakers[r.choice(("en_US", "en_GB", "de_DE", "fr_FR", "nl_NL", "it_IT"))].company() for _ in range(pool // 4)]
        companies += [self._brand(r) + r.choice(["", "", " Inc", " Corp", " Ltd", " Group", " Labs", " Systems", " Bank",
                                                 " Airlines", " Motors", " Energy", " Media", " Foods", " Capital"])
                      for _ in range(pool * 3 // 4)]
        self.pools["company"] = uniq(companies)
        cities = [fakers[r.choice(REAL_CITY_LOCALES)].city() for _ in range(pool)] + [us.city() for _ in range(pool // 6)]
        self.pools["city"] = uniq(cities + WORLD_CITIES * 3)
        self.pools["country"] = uniq(us.country() for _ in range(pool))
        regions = [fakers[loc].state() for loc in ("en_US", "de_DE", "it_IT", "es_ES", "pt_BR", "en_IN") for _ in range(pool // 10)]
        self.pools["region"] = uniq(regions + REGIONS_EXTRA)
        self.pools["job"] = uniq(us.job() for _ in range(pool))
        self.pools["street"] = uniq(fakers[r.choice(("en_US", "en_GB"))].street_address() for _ in range(pool // 3))
        self.pools["domain"] = uniq(us.domain_name() for _ in range(pool // 10))

    # -- composed kinds -------------------------------------------------------------------------------
    @staticmethod
    def _brand(r: random.Random) -> str:
        return _cap("".join(r.choice(SYLLABLE) for _ in range(r.choice((2, 2, 3)))))

    def _title(self, r: random.Random) -> str:
        p = r.random()
        if p < 0.25:
            return f"The {r.choice(ADJ)} {r.choice(NOUN)}"
        if p < 0.45:
            return f"{r.choice(NOUN)} of {r.choice(NOUN)}s"
        if p < 0.6:
            return f"{r.choice(ADJ)} {r.choice(NOUN)}"
        if p < 0.72:
            return f"A {r.choice(NOUN)} in {r.choice(self.pools['city'])}"
        if p < 0.84:
            return f"{r.choice(self.pools['first'])}'s {r.choice(NOUN)}"
        return f"{r.choice(['Return', 'Rise', 'Fall', 'Ballad', 'Legend', 'Diary', 'Song'])} of the {r.choice(ADJ)} {r.choice(NOUN)}"

    def value(self, kind: str, r: random.Random) -> str:
        P = self.pools
        if kind == "person":
            p = r.random()
            if p < 0.65:
                return r.choice(P["person_full"])
            if p < 0.8:
                return r.choice(P["first"])
            if p < 0.9:
                return f"{r.choice(['Mr.', 'Mrs.', 'Ms.', 'Dr.', 'President', 'Senator', 'Coach', 'Judge'])} {r.choice(P['last'])}"
            return f"{r.choice(P['first'])} {r.choice('ABCDEFGHJKLMNPRSTW')}. {r.choice(P['last'])}"
        if kind in ("company", "city", "country", "region", "job", "street"):
            return r.choice(P[kind])
        if kind == "agency":
            return r.choice([f"Ministry of {r.choice(FIELDS)}", f"Department of {r.choice(FIELDS)}",
                             f"National {r.choice(FIELDS)} Agency", f"{r.choice(P['city'])} Police Department",
                             f"{r.choice(P['city'])} City Council", f"{r.choice(P['country'])} Supreme Court",
                             f"Federal Bureau of {r.choice(FIELDS)}", f"{r.choice(P['country'])}n Red Cross"])
        if kind == "university":
            return r.choice([f"University of {r.choice(P['city'])}", f"{r.choice(P['last'])} College",
                             f"{r.choice(P['city'])} Institute of Technology", f"{r.choice(P['region'])} State University",
                             f"{r.choice(P['last'])} University"])
        if kind == "team":
            city = r.choice(P["city"])
            return r.choice([f"{city} {r.choice(PLURAL)}", f"FC {city}", f"{city} United", f"Real {city}",
                             f"{city} {r.choice(['City', 'Athletic', 'Rovers', 'Wanderers'])}", f"the {r.choice(PLURAL)}"])
        if kind == "band":
            return r.choice([f"The {r.choice(ADJ)} {r.choice(PLURAL)}", f"{r.choice(NOUN)} {r.choice(NOUN)}",
                             f"{r.choice(ADJ)} {r.choice(NOUN)}", f"{r.choice(P['first'])} and the {r.choice(PLURAL)}",
                             self._brand(r).upper()])
        if kind == "party":
            return r.choice([f"{r.choice(['Green', 'Labour', 'Liberal', 'Conservative', 'Progressive', 'Democratic', 'Socialist', 'Pirate', 'Unity'])} Party",
                             f"{r.choice(['People', 'Freedom', 'Justice', 'Future'])} Alliance",
                             f"{r.choice(P['country'])} {r.choice(['Democratic Union', 'National Front', 'Workers Party'])}"])
        if kind == "media":
            return r.choice([f"The {r.choice(P['city'])} {r.choice(['Times', 'Post', 'Herald', 'Tribune', 'Gazette'])}",
                             f"{self._brand(r)} News", f"Radio {r.choice(P['city'])}", f"{self._brand(r)} TV"])
        if kind == "device":
            brand = self._brand(r)
            return r.choice([f"{brand} {r.randint(2, 15)}", f"{brand} {r.choice(MODEL_SUFFIX)}",
                             f"{brand} {r.choice(['X', 'Z', 'G', 'Pixel', 'Note', 'Book'])}{r.randint(1, 12)} {r.choice(MODEL_SUFFIX)}",
                             f"{brand} {r.choice(DEVICE_KIND)}"])
        if kind == "software":
            return r.choice([self._brand(r) + r.choice(APP_SUFFIX), f"{self._brand(r)} {r.choice(['Studio', 'Office', 'Player', 'Browser'])}",
                             f"{self._brand(r)}OS {r.randint(3, 18)}"])
        if kind == "vehicle":
            return f"{self._brand(r)} {r.choice(['E-', 'GT ', 'Model ', ''])}{r.randint(1, 9) * 100 if r.random() < 0.5 else r.choice(NOUN)}"
        if kind in ("film", "book", "song", "tv_show", "album", "game"):
            t = self._title(r)
            if kind == "game" and r.random() < 0.4:
                t += f" {r.randint(2, 5)}"
            return t
        if kind == "event":
            year = r.randint(1998, 2027)
            return r.choice([f"{year} {r.choice(P['city'])} {r.choice(EVENT_KIND)}", f"{r.choice(P['city'])} {r.choice(EVENT_KIND)}",
                             f"World {r.choice(SPORTS)} Championship", f"{self._brand(r)} {r.choice(['Developer Conference', 'Summit', 'Expo'])}",
                             f"{r.choice(ADJ)} {r.choice(NOUN)} Festival"])
        if kind == "landmark":
            tpl = r.choice(LANDMARK_PATTERNS)
            return tpl.format(last=r.choice(P["last"]), first=r.choice(P["first"]), city=r.choice(P["city"]),
                              adj=r.choice(ADJ), noun=r.choice(NOUN))
        if kind == "nationality":
            return r.choice(DEMONYMS)
        if kind == "date":
            m = r.choice(["January", "February", "March", "April", "May", "June", "July", "August", "September",
                          "October", "November", "December"])
            d, y = r.randint(1, 28), r.randint(1950, 2030)
            return r.choice([f"{m} {d}, {y}", f"{d} {m} {y}", f"{m} {d}", f"{m} {y}", str(y), f"{y}-{r.randint(1, 12):02d}-{d:02d}",
                             r.choice(["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]),
                             f"last {r.choice(['week', 'month', 'year', 'Friday', 'summer'])}", "yesterday"])
        if kind == "money":
            amount = r.choice([r.randint(2, 99), r.randint(100, 9999), r.randint(10, 900) * 1000])
            return r.choice([f"${amount:,}", f"€{amount:,}", f"£{amount:,}", f"{amount:,} dollars", f"{amount:,} euros",
                             f"${r.randint(1, 90)} million", f"{r.randint(1, 40)} billion dollars"])
        if kind == "percent":
            return r.choice([f"{r.randint(1, 99)}%", f"{r.randint(1, 99)} percent", f"{r.randint(1, 9)}.{r.randint(0, 9)}%"])
        if kind == "email":
            base = r.choice(P["first"]).lower().encode("ascii", "ignore").decode() or "info"
            return f"{base}.{r.choice(P['last']).lower().encode('ascii', 'ignore').decode() or 'mail'}@{r.choice(P['domain'])}"
        if kind == "phone":
            return r.choice([f"+{r.randint(1, 49)} {r.randint(100, 999)} {r.randint(100, 999)} {r.randint(1000, 9999)}",
                             f"({r.randint(200, 999)}) {r.randint(200, 999)}-{r.randint(1000, 9999)}",
                             f"{r.randint(200, 999)}-{r.randint(200, 999)}-{r.randint(1000, 9999)}"])
        if kind == "programming_language":
            return r.choice(PROGRAMMING)
        if kind == "language":
            return r.choice(LANGUAGES)
        if kind == "drug":
            return r.choice(DRUGS)
        if kind == "disease":
            return r.choice(DISEASES)
        raise KeyError(kind)
