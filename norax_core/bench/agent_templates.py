"""The templates of the agent-turn scenarios (:mod:`norax_core.bench.agent_turns`).

Data, not logic. An agent searches its memory with the user's *new request*; each template is
one situation in its own words: the request, the memory that applies to it, and the memories
around it that look alike (rules and preferences for other tasks, chatter and replies sharing
the request's words). A distractor written ``"A: ..."`` is an assistant message; every other
memory is the user's. ``{p}``, ``{q}`` and ``{r}`` are people from
:data:`~norax_core.bench.scenario_templates.PEOPLE`; other slots come from the variants.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from norax_core.bench.scenario_templates import rows

__all__ = ["CURRENT", "INSTRUCTION", "PREFERENCE", "TINY", "Turn"]


@dataclass(frozen=True)
class Turn:
    """An agent-turn template (ages in days before the request, drawn uniformly)."""

    name: str
    query: str
    target: str
    variants: tuple[dict[str, str], ...]
    distractors: tuple[str, ...]
    older: str | None = None
    target_age: tuple[float, float] = (20.0, 200.0)
    older_age: tuple[float, float] = (60.0, 200.0)
    other_age: tuple[float, float] = (0.2, 60.0)
    max_distractors: int = 7


# Look-alike standing rules and preferences for other tasks, shared by the templates below:
# every store holds a few, so the applicable one must be picked among its kind.
OTHER_RULES = (
    "Always answer in British English when you draft emails for me.",
    "Never schedule meetings for me before 10am.",
    "I prefer short bullet points over long paragraphs in summaries.",
    "Please don't use emojis in anything you write for me.",
    "When I ask about stocks, always remind me you are not a financial adviser.",
    "I'd rather get the bad news first.",
)

# -- instruction: a standing rule the new request falls under ---------------------------

INSTRUCTION = (
    Turn(
        "type-hints",
        "Write me a Python function that {task}.",
        "Always add type hints to any code you write for me.",
        rows(
            "task=parses the invoice CSV into a list of dicts|thing=invoice CSV",
            "task=retries a flaky HTTP call with exponential backoff|thing=HTTP client",
            "task=deduplicates the customer list by email|thing=customer list",
        ),
        (
            "The {thing} from {p} had two header rows last month.",
            "A: Here's a quick script for the {thing} that prints the totals.",
            "Can you remind me what a Python decorator does?",
            "{q} wants the {thing} cleaned up before Friday.",
            *OTHER_RULES[:4],
        ),
    ),
    Turn(
        "sql-style",
        "Can you write the query that lists {x}?",
        "Whenever you write SQL for me, use uppercase keywords and CTEs instead of subqueries.",
        rows(
            "x=every customer who churned last quarter|t=customers table",
            "x=the ten slowest API endpoints this week|t=request log table",
            "x=orders that shipped late in March|t=orders table",
        ),
        (
            "The {t} has an index on created_at now.",
            "A: The query I sent earlier joined the {t} twice; it can be simplified.",
            "{p} asked whether we can list {x} in the dashboard.",
            "Our analytics warehouse is BigQuery.",
            *OTHER_RULES[1:5],
        ),
    ),
    Turn(
        "commit-style",
        "Draft a commit message for {x}.",
        "Every time you write a commit message for me, follow Conventional Commits (feat:, "
        "fix:, chore:).",
        rows(
            "x=the fix to the login redirect loop",
            "x=bumping the logging library to the new major version",
            "x=the new CSV export button",
        ),
        (
            "{p} reviewed {x} and approved it.",
            "A: I pushed {x} to a branch for review.",
            "The repo's main branch is protected.",
            "Never push directly to main for me.",
            *OTHER_RULES[2:6],
        ),
    ),
    Turn(
        "email-signoff",
        "Draft a reply to {p} about {x}.",
        "When you draft emails for me, always keep them under 150 words and sign off with "
        "'Cheers'.",
        rows(
            "x=the delayed shipment",
            "x=the contract renewal",
            "x=next quarter's budget",
        ),
        (
            "{p} emailed twice about {x} this week.",
            "A: Here is a summary of {p}'s last email about {x}.",
            "{q} thinks {x} can wait until Monday.",
            "Always add type hints to any code you write for me.",
            "Never schedule meetings for me before 10am.",
            "I prefer short bullet points over long paragraphs in summaries.",
            "When I ask about stocks, always remind me you are not a financial adviser.",
        ),
    ),
    Turn(
        "metric-recipes",
        "Give me a recipe for {x}.",
        "Always use metric units (grams, millilitres, Celsius) in recipes you give me.",
        rows("x=banana bread", "x=a Thai green curry", "x=sourdough pizza dough"),
        (
            "{p} made {x} for the party and it was great.",
            "A: Last time I suggested {x} with a shortcut using store-bought paste.",
            "We're out of flour until the weekend.",
            "Always cite your sources with links when you summarise research for me.",
            *OTHER_RULES[:4],
        ),
    ),
    Turn(
        "cite-sources",
        "Summarise the latest research on {x}.",
        "Always cite your sources with links when you summarise research for me.",
        rows("x=intermittent fasting", "x=battery recycling", "x=remote work productivity"),
        (
            "{p} sent me an article on {x} yesterday.",
            "A: The main finding on {x} was mixed, with small samples.",
            "I'm reading a book about {x} at the moment.",
            "Always use metric units in recipes you give me.",
            *OTHER_RULES[1:5],
        ),
    ),
    Turn(
        "unit-tests",
        "Implement {x} in our TypeScript service.",
        "Make sure to include unit tests with any code change you suggest for me.",
        rows("x=rate limiting per API key", "x=soft deletes for projects", "x=the webhook retry"),
        (
            "{p} started looking at {x} but got pulled into the outage.",
            "A: {x} touches the middleware and the database layer.",
            "The TypeScript service deploys every afternoon.",
            "Please don't use emojis in anything you write for me.",
            *OTHER_RULES[:3],
            OTHER_RULES[5],
        ),
    ),
    Turn(
        "no-sudo",
        "How do I {x} on the build server?",
        "Please don't give me commands that need sudo; I have no root on our servers.",
        rows(
            "x=free up disk space",
            "x=install a newer version of Node",
            "x=see which process holds port 8080",
        ),
        (
            "The build server ran out of disk on Tuesday.",
            "A: You can {x} from the admin panel if {p} grants you access.",
            "{q} manages the build server.",
            *OTHER_RULES[:5],
        ),
    ),
    Turn(
        "action-items",
        "Write up the notes from today's {x} meeting.",
        "Always put the action items with their owners at the top of meeting notes.",
        rows("x=design review", "x=quarterly planning", "x=vendor"),
        (
            "{p} ran the {x} meeting and it went long.",
            "A: The {x} meeting agenda had four items.",
            "{q} couldn't make the {x} meeting.",
            "Never schedule meetings for me before 10am.",
            *OTHER_RULES[2:6],
        ),
    ),
    Turn(
        "flight-times",
        "Book me a flight to {x} next month.",
        "Never book me on flights that leave before 8am.",
        rows("x=Lisbon", "x=Chicago", "x=Singapore"),
        (
            "{p} flew to {x} last spring and loved it.",
            "A: Flights to {x} are cheapest on Tuesdays.",
            "My passport expires in two years.",
            "Always put the action items with their owners at the top of meeting notes.",
            *OTHER_RULES[:4],
        ),
    ),
    Turn(
        "american-spelling",
        "Write a README section about {x}.",
        "From now on, use American spelling in any documentation you write for me.",
        rows("x=configuring the cache", "x=running the tests locally", "x=the plugin API"),
        (
            "{p} complained that the README skips {x}.",
            "A: The docs folder already has a page on {x}.",
            "We host the documentation on GitHub Pages.",
            *OTHER_RULES[1:6],
        ),
    ),
    Turn(
        "explain-level",
        "Explain how {x} works.",
        "Whenever I ask you to explain something technical, start with a one-sentence "
        "summary and skip the history.",
        rows("x=garbage collection in Java", "x=DNS resolution", "x=a B-tree index"),
        (
            "{p} gave a talk on {x} at the meetup.",
            "A: {x} came up in yesterday's incident review.",
            "I have an interview next week that may ask about {x}.",
            *OTHER_RULES[:5],
        ),
    ),
)

# -- preference: the user's taste or constraint the request must respect ------------------

PREFERENCE = (
    Turn(
        "vegetarian",
        "Plan dinner for Friday with {p}.",
        "I'm vegetarian, so no meat or fish for me.",
        rows("x=dinner"),
        (
            "{p} is back in town on Friday.",
            "A: The Italian place on Main Street takes reservations for Friday.",
            "Friday's standup moved to 11.",
            "I prefer aisle seats on long flights.",
            "Always use metric units in recipes you give me.",
            "I'd rather get the bad news first.",
            "{q} loved the steakhouse we went to last month.",
        ),
    ),
    Turn(
        "minimal-deps",
        "Which library should I use to {x} in our Node app?",
        "I'm trying to keep the dependency list of our apps as small as possible.",
        rows("x=parse dates", "x=validate form input", "x=send emails"),
        (
            "{p} suggested a library to {x} last week.",
            "A: The Node app currently uses Express and Postgres.",
            "Our Node app is on version 20.",
            "I prefer short bullet points over long paragraphs in summaries.",
            *OTHER_RULES[:2],
            OTHER_RULES[3],
        ),
    ),
    Turn(
        "aisle-seat",
        "Find me a flight to {x} for the conference.",
        "I prefer aisle seats and I'd rather avoid layovers when I fly.",
        rows("x=Berlin", "x=Toronto", "x=Tokyo"),
        (
            "The conference in {x} starts on a Wednesday.",
            "A: {p} is also going to the {x} conference.",
            "{q} booked the conference hotel already.",
            "I'm vegetarian, so no meat or fish for me.",
            *OTHER_RULES[:3],
            OTHER_RULES[4],
        ),
    ),
    Turn(
        "peanut-allergy",
        "Suggest a dessert for {p}'s birthday party.",
        "I'm allergic to peanuts, so keep them out of anything you suggest I eat.",
        rows("x=birthday"),
        (
            "{p}'s birthday party is on Saturday at {q}'s place.",
            "A: Last year the party had a chocolate cake from the corner bakery.",
            "{r} is bringing the drinks for the party.",
            "I prefer aisle seats on long flights.",
            *OTHER_RULES[1:4],
        ),
    ),
    Turn(
        "afternoon-calls",
        "Schedule a call with {p} next week.",
        "I'd rather keep my mornings free for deep work; afternoons are better for calls.",
        rows("x=call"),
        (
            "{p} is in a different time zone.",
            "A: Your calendar next week has the offsite on Thursday.",
            "The last call with {p} ran over by half an hour.",
            "{q} wants to join the next call.",
            *OTHER_RULES[:1],
            *OTHER_RULES[2:5],
        ),
    ),
    Turn(
        "dark-mode",
        "Recommend a colour scheme for my new {x} setup.",
        "I can't stand light themes; dark backgrounds only for me.",
        rows("x=terminal", "x=VS Code", "x=Neovim"),
        (
            "{p} shared their {x} config on the team wiki.",
            "A: The {x} setup guide lists the font options.",
            "I bought a new monitor for the home office.",
            *OTHER_RULES[1:5],
        ),
    ),
    Turn(
        "cheap-hotel",
        "Book a hotel in {x} for three nights.",
        "I'd rather stay somewhere cheap and walkable than in a fancy hotel.",
        rows("x=Rome", "x=Seoul", "x=Barcelona"),
        (
            "{p} stayed at a hotel in {x} near the station.",
            "A: Hotels in {x} are busy that week because of a festival.",
            "The trip to {x} is for {q}'s wedding.",
            "Never book me on flights that leave before 8am.",
            *OTHER_RULES[:3],
        ),
    ),
    Turn(
        "indentation",
        "Set up the code formatter for the new {x} repo.",
        "I prefer four-space indentation and a 100-character line limit.",
        rows("x=Python", "x=billing", "x=mobile"),
        (
            "{p} created the new {x} repo on Monday.",
            "A: The old {x} repo used a pre-commit hook.",
            "{q} will review the first pull requests in the {x} repo.",
            *OTHER_RULES[:4],
        ),
    ),
    Turn(
        "no-running",
        "Plan a workout routine for next week.",
        "I really dislike running, but I enjoy cycling and swimming.",
        rows("x=workout"),
        (
            "My gym is closed next Monday.",
            "A: Last week's routine had three strength sessions.",
            "{p} and I want to train for a charity event.",
            "I'm vegetarian, so no meat or fish for me.",
            *OTHER_RULES[1:4],
        ),
    ),
    Turn(
        "no-alcohol",
        "Order drinks for the team offsite in {x}.",
        "I don't drink alcohol, so count me out of the wine.",
        rows("x=the mountains", "x=Porto", "x=the lake house"),
        (
            "The team offsite in {x} is for twelve people.",
            "A: {p} handled the catering for the last offsite.",
            "{q} asked for a vegan lunch option at the offsite.",
            "I prefer aisle seats on long flights.",
            *OTHER_RULES[:3],
        ),
    ),
    Turn(
        "history-books",
        "Recommend a book for my flight to {x}.",
        "I'm not a fan of fantasy novels; history and biographies are more my thing.",
        rows("x=Sydney", "x=New York", "x=Nairobi"),
        (
            "{p} lent me a thriller last summer.",
            "A: The flight to {x} is about eleven hours.",
            "My e-reader battery lasts about a week.",
            "I prefer aisle seats on long flights.",
            *OTHER_RULES[:3],
        ),
    ),
    Turn(
        "slack-updates",
        "Send {p} an update on the {x}.",
        "I prefer Slack messages over email for quick updates to the team.",
        rows("x=migration", "x=hiring plan", "x=launch date"),
        (
            "{p} asked about the {x} in the last standup.",
            "A: The {x} is on track according to {q}.",
            "The {x} document lives in the shared drive.",
            *OTHER_RULES[:5],
        ),
    ),
)

# -- current: a stale and a current fact about the same subject ------------------------------

CURRENT = tuple(
    replace(t, target_age=(1.0, 25.0), older_age=(60.0, 300.0), max_distractors=5)
    for t in (
        Turn(
            "staging-host",
            "Where does staging run these days?",
            "We migrated staging to {new} last week.",
            rows(
                "new=Fly.io|old=staging-1 in our own rack", "new=Render|old=an EC2 box in us-east"
            ),
            (
                "Production runs on Kubernetes.",
                "{p} wants to add a second staging environment.",
                "A: Staging deploys take about four minutes.",
                "{q} reset the staging database on Monday.",
            ),
            older="Staging runs on {old}.",
        ),
        Turn(
            "home-city",
            "Where does {p} live now?",
            "{p} moved to {new} in the spring.",
            rows("new=Sapporo|old=Osaka", "new=Leeds|old=Bristol", "new=Denver|old=Austin"),
            (
                "{p} loves hiking on weekends.",
                "{q} visited {old} for a conference.",
                "A: {p} mentioned the flat had a balcony.",
                "{r} lives near the office.",
            ),
            older="{p} lives in {old}.",
        ),
        Turn(
            "manager",
            "Who is {p}'s manager at the moment?",
            "After the reorg {p} reports to {r}.",
            rows("x=1"),
            (
                "{p} leads the payments squad.",
                "{r} joined the company in 2021.",
                "A: {q} approved {p}'s vacation request.",
                "The reorg was announced at the all-hands.",
            ),
            older="{p} reports to {q}.",
        ),
        Turn(
            "weekly-sync",
            "When is the weekly sync currently?",
            "We moved the weekly sync from {old} to {new}.",
            rows(
                "old=Monday at 10am|new=Tuesday at 2pm",
                "old=Thursday at 9am|new=Wednesday at 4pm",
            ),
            (
                "{p} takes notes in the weekly sync.",
                "The design review is every other Friday.",
                "A: The weekly sync agenda is in the shared doc.",
                "{q} will miss the next sync.",
            ),
            older="The weekly sync is on {old}.",
        ),
        Turn(
            "service-db",
            "What database does the {x} service use now?",
            "The {x} service was switched over to {new}.",
            rows("x=orders|new=Postgres|old=MySQL", "x=search|new=OpenSearch|old=Solr"),
            (
                "{p} owns the {x} service.",
                "The {x} service handles about 200 requests a second.",
                "A: Database backups run nightly at 2am.",
                "{q} proposed caching in front of the {x} service.",
            ),
            older="The {x} service stores everything in {old}.",
        ),
        Turn(
            "gym",
            "Which gym am I going to at the moment?",
            "I cancelled my old membership and joined {new} closer to work.",
            rows("new=Iron Works|old=the gym on Elm Street", "new=PureFit|old=the YMCA downtown"),
            (
                "I try to train three times a week.",
                "{p} recommended a personal trainer.",
                "A: Your membership renewal email arrived in January.",
                "The office has showers on the second floor.",
            ),
            older="I go to {old} after work.",
        ),
        Turn(
            "running-distance",
            "How far am I running these days?",
            "I've worked up to {new} runs now.",
            rows("new=10k|old=5k", "new=half-marathon|old=3k"),
            (
                "My running shoes are nearly worn out.",
                "{p} runs with me on Saturdays.",
                "A: A rest day after long runs helps recovery.",
                "There's a 10k race in town in June.",
            ),
            older="I'm running {old} three times a week.",
        ),
        Turn(
            "plan-price",
            "What does the {x} plan cost currently?",
            "We raised the {x} plan to {new} a month.",
            rows("x=Pro|new=$25|old=$20", "x=Team|new=$99|old=$79"),
            (
                "The {x} plan includes priority support.",
                "{p} asked for an annual discount on the {x} plan.",
                "A: Most new sign-ups choose the {x} plan.",
                "The free tier allows three projects.",
            ),
            older="The {x} plan is {old} a month.",
        ),
        Turn(
            "on-call",
            "Who is currently on call for {x}?",
            "{q} took over the {x} on-call rotation from {p}.",
            rows("x=payments", "x=the mobile app", "x=the data pipeline"),
            (
                "The {x} on-call handbook was updated.",
                "{r} is on holiday until the 14th.",
                "A: Last night's {x} alert was a false alarm.",
                "On-call shifts are one week long.",
            ),
            older="{p} is on call for {x}.",
        ),
        Turn(
            "node-version",
            "What {x} version are we on now?",
            "We upgraded the API to {x} {new}.",
            rows("x=Node|new=20|old=16", "x=Python|new=3.12|old=3.9", "x=Java|new=21|old=11"),
            (
                "{p} maintains the API's Dockerfile.",
                "The API's test suite takes six minutes.",
                "A: Upgrading {x} may break a few dependencies.",
                "{q} wants to try Bun for the scripts.",
            ),
            older="The API runs on {x} {old}.",
        ),
        Turn(
            "car",
            "What car does {p} drive these days?",
            "{p} sold the {old} and bought a {new}.",
            rows("old=Corolla|new=used Tesla", "old=Golf|new=Volvo estate"),
            (
                "{p} commutes about forty minutes each way.",
                "{q} drives an electric scooter.",
                "A: Parking at the office costs $12 a day.",
                "{p} got a speeding ticket years ago.",
            ),
            older="{p} drives an old {old}.",
        ),
        Turn(
            "editor",
            "Which editor am I using at the moment?",
            "I switched to {new} last month.",
            rows("new=Neovim|old=VS Code", "new=Zed|old=PyCharm", "new=Helix|old=Sublime Text"),
            (
                "My laptop is a 14-inch MacBook.",
                "{p} uses Emacs for everything.",
                "A: The team's editor settings are in the repo.",
                "I use a split keyboard now.",
            ),
            older="I do all my coding in {old}.",
        ),
    )
)

# -- tiny: two memories, the query names an exact keyword only one of them holds -------------

TINY = tuple(
    replace(t, max_distractors=1, target_age=(0.5, 30.0), other_age=(0.5, 30.0))
    for t in (
        Turn(
            "orm",
            "Do we use {x} anywhere?",
            "The billing service uses {x} for migrations.",
            rows("x=TypeORM|y=Prisma", "x=Sequelize|y=Drizzle", "x=Alembic|y=Flyway"),
            ("The auth service uses {y} for migrations.",),
        ),
        Turn(
            "queue",
            "What goes through {x}?",
            "Order events are published to {x}.",
            rows("x=Kafka|y=RabbitMQ", "x=NATS|y=SQS", "x=Pulsar|y=Redis streams"),
            ("Payment events are published to {y}.",),
        ),
        Turn(
            "ticket",
            "What's the status of {x}?",
            "{x} is blocked on the security review.",
            rows("x=JIRA-4512|y=JIRA-4498", "x=OPS-88|y=OPS-91", "x=PR #1207|y=PR #1199"),
            ("{y} is waiting for design sign-off.",),
        ),
        Turn(
            "error-code",
            "What does error {x} mean in our API?",
            "Error {x} means the upload exceeded the size limit.",
            rows("x=E1042|y=E1043", "x=ERR_QUOTA_7|y=ERR_QUOTA_9", "x=0x8007|y=0x8005"),
            ("Error {y} means the token has expired.",),
        ),
        Turn(
            "host",
            "Who owns {x}?",
            "{p} looks after {x} and its backups.",
            rows("x=db-prod-03|y=db-prod-04", "x=gw-eu-1|y=gw-us-2", "x=ci-runner-7|y=ci-runner-2"),
            ("{q} looks after {y} and its backups.",),
        ),
        Turn(
            "flag",
            "Is {x} still turned on?",
            "The feature flag {x} is enabled for ten percent of users.",
            rows(
                "x=new_checkout|y=fast_search", "x=beta_inbox|y=dark_launch", "x=v2_pricing|y=sso"
            ),
            ("The feature flag {y} is enabled for staff only.",),
        ),
        Turn(
            "library-version",
            "Which version of {x} did we pin?",
            "We pinned {x} to 2.3 because 2.4 broke the build.",
            rows("x=pydantic|y=fastapi", "x=webpack|y=babel", "x=numpy|y=pandas"),
            ("We pinned {y} to 1.8 because 1.9 broke the build.",),
        ),
        Turn(
            "customer",
            "What did {x} ask for?",
            "{x} asked for single sign-on before renewing.",
            rows("x=Acme Corp|y=Globex", "x=Initech|y=Umbrella", "x=Hooli|y=Pied Piper"),
            ("{y} asked for an audit log before renewing.",),
        ),
        Turn(
            "wifi",
            "What's the password for {x}?",
            "The {x} network password is on the fridge.",
            rows("x=GuestNet|y=OfficeNet", "x=Hearth-5G|y=Hearth-2G", "x=LabWiFi|y=StudioWiFi"),
            ("The {y} network password is in the drawer.",),
        ),
        Turn(
            "medication",
            "When do I take the {x}?",
            "Take the {x} with breakfast.",
            rows(
                "x=metformin|y=atorvastatin", "x=ibuprofen|y=omeprazole", "x=levothyroxine|y=iron"
            ),
            ("Take the {y} before bed.",),
        ),
        Turn(
            "recipe-ingredient",
            "Which recipe uses {x}?",
            "The Sunday stew needs {x}.",
            rows("x=star anise|y=smoked paprika", "x=tamarind|y=sumac", "x=miso|y=harissa"),
            ("The Friday curry needs {y}.",),
        ),
    )
)
