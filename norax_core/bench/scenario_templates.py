"""The templates of the seed-promise scenarios (:mod:`norax_core.bench.scenarios`).

Data, not logic: each family's templates, every one a different situation written in its own
words, with coherent variants for its slots. ``{p}``, ``{q}`` and ``{r}`` are people drawn
from :data:`PEOPLE`; the other slots come from the template's variants.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GRAPH", "KEYWORDS", "MEANING", "PEOPLE", "RECENCY", "SCRATCHPAD", "Template"]

PEOPLE = (
    "Colby", "Priya", "Mateo", "Aiko", "Farah", "Jonas", "Lena", "Kwame", "Rosa", "Dmitri",
    "Noor", "Tobias", "Ines", "Hiroshi", "Amara", "Sven", "Layla", "Marcus", "Yuki", "Olga",
)  # fmt: skip
"""First names the templates' ``{p}``, ``{q}`` and ``{r}`` are drawn from."""


@dataclass(frozen=True)
class Template:
    """A scenario family's template.

    ``target``, ``older``, ``bridges`` and ``distractors`` are format strings over the
    variant's keys and the people ``p``, ``q``, ``r``. Ages are in days (ranges drawn
    uniformly); kinds as written. ``distractors`` are all used when there are few; at most
    ``max_distractors`` are drawn otherwise.
    """

    name: str
    query: str
    target: str
    variants: tuple[dict[str, str], ...]
    distractors: tuple[str, ...]
    bridges: tuple[str, ...] = ()
    older: str | None = None
    target_kind: str = "episodic"
    older_kind: str = "episodic"
    target_age: tuple[float, float] = (5.0, 60.0)
    older_age: tuple[float, float] = (60.0, 150.0)
    other_age: tuple[float, float] = (1.0, 90.0)
    other_kinds: tuple[str, ...] = ("episodic", "semantic")
    max_distractors: int = 6


def rows(*rows: str) -> tuple[dict[str, str], ...]:
    """Variants from ``"key=value|key=value"`` rows (a compact table of coherent slots)."""
    return tuple(dict(cell.split("=", 1) for cell in row.split("|")) for row in rows)


# -- graph: the decision never names the query's object ---------------------------------

GRAPH = (
    Template(
        "payments-chain",
        "What did we decide about the {x}?",
        "{p} decided to use {y} for all {z}.",
        rows(
            "x=wallet|y=Base chain|z=payments",
            "x=treasury account|y=Polygon|z=vendor payouts",
            "x=tip jar|y=Lightning|z=creator donations",
        ),
        bridges=("{p} set up the team {x} on {y} last sprint.",),
        distractors=(
            "We decided to move the offsite to Lisbon.",
            "The {x} screen shows the balance twice on Android.",
            "{q} decided the logo should stay green.",
            "What we decide about hiring waits for the budget review.",
            "{r} asked whether the {x} export needs a CSV option.",
            "We agreed the retro happens every other Friday.",
        ),
    ),
    Template(
        "dashboard-vendor",
        "What was decided about the {x}?",
        "{p} chose {y} as the standard, and every team migrates to it by {m}.",
        rows(
            "x=metrics dashboard|y=Grafana|m=June",
            "x=status page|y=Statuspage|m=August",
            "x=error tracker|y=Sentry|m=October",
        ),
        bridges=("The {x} is being rebuilt on {y} by {q}.",),
        distractors=(
            "It was decided that Monday standups are optional for interns.",
            "The {x} loads slowly over the VPN.",
            "{r} decided to drop the legacy billing report.",
            "Nothing was decided about the parking spaces yet.",
            "The {x} colour scheme was tweaked by design.",
        ),
    ),
    Template(
        "conference-city",
        "Did we settle on anything for the {x}?",
        "{p} booked {y} for three days in {m}; that's settled.",
        rows(
            "x=summit|y=the Hilton Porto|m=May",
            "x=team offsite|y=Villa Serena|m=September",
            "x=customer conference|y=the Barbican hall|m=April",
        ),
        bridges=("{q} is organising the {x} and shortlisted {y}.",),
        distractors=(
            "We settled the argument about tabs versus spaces: spaces.",
            "The {x} budget spreadsheet is on the shared drive.",
            "{r} settled the invoice from the catering company.",
            "Anything for the newsletter goes through {r}.",
            "The {x} swag order is still open.",
        ),
    ),
    Template(
        "database-choice",
        "What's the decision on the {x}?",
        "{p}: we go with {y}, final answer, the benchmark convinced everyone.",
        rows(
            "x=search backend|y=OpenSearch",
            "x=analytics warehouse|y=ClickHouse",
            "x=job queue|y=RabbitMQ",
        ),
        bridges=("{q} wrote the comparison doc for the {x}, with {y} and two alternatives.",),
        distractors=(
            "The decision on the office plants is to water them on Mondays.",
            "The {x} went down for ten minutes on Tuesday.",
            "{r} made the decision to freeze merges before the release.",
            "Alerts from the {x} go to the on-call channel.",
            "Decision pending: whether to rename the mobile app.",
        ),
    ),
    Template(
        "design-system",
        "What did the team decide on the {x}?",
        "After the vote, {p} announced that {y} wins and the old kit is deprecated.",
        rows(
            "x=component library|y=Radix",
            "x=icon set|y=Phosphor",
            "x=charting library|y=Recharts",
        ),
        bridges=("{q} prototyped the {x} with {y} and showed it at the demo.",),
        distractors=(
            "The team decided to celebrate the launch with a dinner.",
            "The {x} has no dark mode yet.",
            "{r} decided to take Friday off.",
            "The team still needs to decide who presents at the all-hands.",
            "Docs for the {x} live in Storybook.",
        ),
    ),
    Template(
        "vendor-contract",
        "What did we agree about the {x}?",
        "{p} signed with {y} for two years at the discounted rate.",
        rows(
            "x=cloud contract|y=Hetzner",
            "x=email provider|y=Postmark",
            "x=phone system|y=Aircall",
        ),
        bridges=("{y} sent {p} their final offer for the {x} renewal.",),
        distractors=(
            "We agreed to keep meetings under thirty minutes.",
            "The {x} renewal reminder is in {q}'s calendar.",
            "{r} agreed to mentor the new backend hire.",
            "Legal wants to review anything about data residency.",
            "The {x} invoice was paid late last quarter.",
        ),
    ),
    Template(
        "mobile-release",
        "Where did we land on the {x}?",
        "{p} decided {y} ships first and the rest waits for the next train.",
        rows(
            "x=app update|y=the offline mode",
            "x=iOS release|y=the widget",
            "x=tablet version|y=split view",
        ),
        bridges=("The {x} bundles {y} with the new onboarding flow, {q} said.",),
        distractors=(
            "We decided to stop using the old Jira board.",
            "The {x} failed review once because of a privacy label.",
            "{r} decided the holiday rota.",
            "Screenshots for the {x} still need translating.",
            "What we decide about pricing affects the store listing.",
        ),
    ),
    Template(
        "hiring-role",
        "What was the outcome for the {x}?",
        "{p} made an offer to {q} and {q} accepted on Thursday.",
        rows(
            "x=backend opening",
            "x=design lead search",
            "x=data engineer role",
        ),
        bridges=("{q} had the final interview for the {x} with {p}.",),
        distractors=(
            "The outcome of the security audit was two minor findings.",
            "The {x} was posted on three job boards.",
            "{r} is waiting for the outcome of the visa application.",
            "Referral bonuses for the {x} were doubled.",
            "The outcome for the sales target was 104 percent.",
        ),
    ),
    Template(
        "ci-provider",
        "Have we decided anything about the {x}?",
        "{p} moved all CI jobs to {y}; the old machines get switched off.",
        rows(
            "x=build servers|y=Buildkite",
            "x=test runners|y=GitHub Actions",
            "x=deploy pipeline|y=Argo CD",
        ),
        bridges=("The {x} cost review by {q} recommended {y}.",),
        distractors=(
            "We decided anything over 500 lines needs two reviewers.",
            "The {x} ran out of disk space twice this month.",
            "{r} has not decided whether to join the platform team.",
            "Flaky tests on the {x} are tracked in a spreadsheet.",
            "The {x} logs are kept for fourteen days.",
        ),
    ),
    Template(
        "api-versioning",
        "What did we conclude about the {x}?",
        "Conclusion from {p}'s RFC: {y}, no exceptions.",
        rows(
            "x=public API|y=version in the URL path",
            "x=webhooks|y=signed payloads with HMAC",
            "x=partner SDK|y=semantic versioning with a six-month overlap",
        ),
        bridges=("{p} wrote an RFC on the {x}; {q} reviewed it.",),
        distractors=(
            "We concluded the outage was caused by a DNS change.",
            "The {x} docs have a broken link on the first page.",
            "{r} concluded the pilot with the Berlin office.",
            "Usage of the {x} doubled after the launch.",
            "The {x} rate limits confuse new customers.",
        ),
    ),
    Template(
        "office-move",
        "Any decision on the {x}?",
        "{p} picked {y}; the lease starts next quarter.",
        rows(
            "x=new office|y=the loft on Canal Street",
            "x=London desk space|y=the WeWork at Moorgate",
            "x=warehouse|y=the unit near the airport",
        ),
        bridges=("{q} toured {y} as an option for the {x}.",),
        distractors=(
            "Any decision on travel budgets goes through finance.",
            "The {x} needs bike storage, {r} says.",
            "No decision yet on the team t-shirts.",
            "The {x} search started in January.",
            "{r} decided to work remotely on Wednesdays.",
        ),
    ),
)

# -- recency: the newer of two facts, for a current-state question -----------------------

RECENCY = (
    Template(
        "standup-time",
        "When is the standup these days?",
        "Heads up: the standup moved to {new} starting this week.",
        rows("old=9:30|new=10:15", "old=10:00|new=9:00", "old=11:00|new=10:30"),
        older="The daily standup is at {old} in the small meeting room.",
        distractors=(
            "The standup notes go in the team wiki.",
            "{q} skips the standup on Fridays.",
            "Standups used to run long before we added the timer.",
            "The design review is every Thursday at 15:00.",
        ),
    ),
    Template(
        "deadline",
        "What's the current deadline for the {x}?",
        "The {x} deadline moved to {new} because of the audit.",
        rows(
            "x=migration|old=Monday|new=Friday",
            "x=launch|old=March 3|new=March 17",
            "x=report|old=the end of May|new=mid-June",
        ),
        older="The {x} deadline is {old}.",
        distractors=(
            "{q} thinks the {x} is on track.",
            "Current sprint goals are pinned in the channel.",
            "The {x} checklist has twelve items.",
            "Deadlines for expense reports are the 5th of each month.",
        ),
    ),
    Template(
        "manager",
        "Who is {p}'s manager now?",
        "{p} now reports to {new} after the reorg.",
        rows("old=Marcus|new=Ines", "old=Olga|new=Hiroshi", "old=Sven|new=Amara"),
        older="{p}'s manager is {old}.",
        distractors=(
            "{p} manages the hiring pipeline for support.",
            "The manager offsite is in October.",
            "{p} asked for a new monitor.",
            "Managers approve leave in the HR tool.",
        ),
    ),
    Template(
        "hosting",
        "Where is the {x} hosted these days?",
        "We finished moving the {x} to {new}; the old account is closed.",
        rows(
            "x=marketing site|old=Heroku|new=Vercel",
            "x=main API|old=AWS Frankfurt|new=Google Cloud in Belgium",
            "x=docs site|old=Netlify|new=Cloudflare Pages",
        ),
        older="The {x} is hosted on {old}.",
        distractors=(
            "The {x} had 40,000 visitors last month.",
            "Hosting costs are reviewed every quarter.",
            "{q} redesigned the {x} header.",
            "These days most traffic comes from mobile.",
        ),
    ),
    Template(
        "price",
        "How much does the {x} cost now?",
        "From this month the {x} is {new} per seat.",
        rows(
            "x=Pro plan|old=$12|new=$15",
            "x=team plan|old=€20|new=€18",
            "x=enterprise tier|old=$40|new=$45",
        ),
        older="The {x} costs {old} per seat.",
        distractors=(
            "The {x} includes priority support.",
            "{q} wants a cost breakdown per region.",
            "Discounts on the {x} need sales approval.",
            "Now that we have SSO, the free plan lost a feature.",
        ),
    ),
    Template(
        "oncall",
        "Who is on call right now?",
        "Swap: {new} took over the on-call pager from today.",
        rows("old=Jonas|new=Noor", "old=Layla|new=Tobias", "old=Kwame|new=Yuki"),
        older="{old} is on call this week.",
        distractors=(
            "The on-call handbook lives in the ops repo.",
            "Right now the error rate is normal.",
            "On-call pay was raised last year.",
            "{q} wants a quieter on-call rotation.",
        ),
    ),
    Template(
        "db-version",
        "Which {x} version are we on at the moment?",
        "Upgrade done: production runs {x} {new}.",
        rows(
            "x=Postgres|old=14|new=16",
            "x=Node|old=18|new=22",
            "x=Python|old=3.10|new=3.12",
        ),
        older="Production runs {x} {old}.",
        distractors=(
            "{q} wrote the {x} style guide.",
            "At the moment the staging server is down.",
            "The {x} upgrade checklist has a rollback plan.",
            "Version numbers are tagged in the release notes.",
        ),
    ),
    Template(
        "address",
        "What's {p}'s address these days?",
        "{p} moved; the new address is {new}.",
        rows(
            "old=12 Elm Street|new=4 Harbour Road",
            "old=Rua Augusta 88|new=Avenida da Liberdade 210",
            "old=Kastanienallee 5|new=Torstraße 77",
        ),
        older="{p} lives at {old}.",
        distractors=(
            "{p}'s email address changed when the domain moved.",
            "These days {p} cycles to work.",
            "Send the holiday cards to each person's home address.",
            "{q} lives near the station.",
        ),
    ),
    Template(
        "editor",
        "Which editor does {p} use nowadays?",
        "{p} switched to {new} and likes it a lot.",
        rows("old=Vim|new=Zed", "old=VS Code|new=Cursor", "old=Emacs|new=Neovim"),
        older="{p} writes everything in {old}.",
        distractors=(
            "{p} uses a split keyboard.",
            "The editor config is shared in the dotfiles repo.",
            "Nowadays code review happens in the afternoon.",
            "{q} asked which font {p} uses.",
        ),
    ),
    Template(
        "meeting-room",
        "Is the retro still in {old}?",
        "The retro is in {new} from now on, {old} is being renovated.",
        rows(
            "old=Room Atlas|new=Room Borealis",
            "old=the library|new=the rooftop room",
            "old=Orion|new=Vega",
        ),
        older="The retro is held in {old}.",
        distractors=(
            "{old} has a broken projector cable.",
            "The retro template has three columns.",
            "{q} still owes the team a retro summary.",
            "Book {old} through the calendar.",
        ),
    ),
    Template(
        "team-size",
        "How many people are on the {x} team currently?",
        "With the two new hires, the {x} team is {new} people.",
        rows(
            "x=platform|old=five|new=seven",
            "x=mobile|old=four|new=six",
            "x=data|old=three|new=five",
        ),
        older="The {x} team has {old} people.",
        distractors=(
            "The {x} team sits on the third floor.",
            "Currently hiring for sales and support.",
            "{q} leads the {x} team's weekly sync.",
            "People on the {x} team rotate code review duty.",
        ),
    ),
)

# -- scratchpad: the fresh note above the months-old one -------------------------------

SCRATCHPAD = (
    Template(
        "migration-todo",
        "Where did I leave off with the {x} migration?",
        "Scratch: {x} migration paused after step 3, the backfill script is half done.",
        rows("x=orders table", "x=users table", "x=invoices schema"),
        older="Scratch: {x} migration not started, first write the plan.",
        distractors=(
            "The {x} has 40 million rows.",
            "Migration guides live in the wiki.",
            "{q} left a comment on the {x} ticket.",
            "Old migrations are squashed every year.",
        ),
    ),
    Template(
        "bug-hunt",
        "What was I doing on the {x} bug?",
        "Note to self: reproduced the {x} bug with the debug build, suspect the cache key.",
        rows("x=login timeout", "x=checkout crash", "x=duplicate email"),
        older="Note to self: look into the {x} bug when there is time.",
        distractors=(
            "The {x} bug was reported by three customers.",
            "{q} fixed a similar bug last year.",
            "Bug triage happens on Mondays.",
            "What I was doing before lunch: inbox zero.",
        ),
    ),
    Template(
        "draft-email",
        "What's in my draft for {p}?",
        "Draft for {p}: thank them for the intro, ask about the {x} timeline, propose Tuesday.",
        rows("x=pilot", "x=partnership", "x=integration"),
        older="Draft for {p}: congratulate them on the new job.",
        distractors=(
            "{p} prefers short emails.",
            "Drafts older than a month get archived.",
            "{p} met {q} at the {x} kickoff.",
            "The {x} contract is with legal.",
        ),
    ),
    Template(
        "shopping-list",
        "What's on my list for the {x}?",
        "List for the {x}: extension cords, name badges, {y}.",
        rows(
            "x=workshop|y=sticky notes", "x=demo day|y=HDMI adapters", "x=team lunch|y=paper plates"
        ),
        older="List for the {x}: book a room.",
        distractors=(
            "The {x} is on the 14th.",
            "{q} volunteered to help with the {x}.",
            "Lists are shared in the planning doc.",
            "The {x} feedback form has five questions.",
        ),
    ),
    Template(
        "next-steps",
        "What are my next steps on the {x}?",
        "Next: rerun the {x} load test with 2x traffic, then send numbers to {p}.",
        rows("x=cache rollout", "x=search index", "x=rate limiter"),
        older="Next: read the {x} design doc.",
        distractors=(
            "The {x} design doc was written by {p}.",
            "Steps for a rollback are in the runbook.",
            "{q} owns the {x} alerts.",
            "The {x} passed review last week.",
        ),
    ),
    Template(
        "reading-page",
        "Which page am I on in {x}?",
        "Reading {x}: stopped at page {n}, chapter on estimation.",
        rows(
            "x=The Pragmatic Programmer|n=212",
            "x=Designing Data-Intensive Applications|n=341",
            "x=Accelerate|n=98",
        ),
        older="Reading {x}: stopped at page 12.",
        distractors=(
            "{q} recommended {x}.",
            "The book club meets on the last Friday.",
            "Page numbers in the e-book differ from print.",
            "{x} has a chapter on team topologies.",
        ),
    ),
    Template(
        "debug-state",
        "What did I find so far about the {x}?",
        "Findings: the {x} shows up only under HTTP/2 and gets worse by the hour.",
        rows("x=memory leak", "x=slow startup", "x=socket exhaustion"),
        older="Findings: nothing yet on the {x}.",
        distractors=(
            "The {x} was first seen in production.",
            "{q} found a {x} in the worker service two years ago.",
            "So far the incident doc has no owner.",
            "Profiling tools are listed in the handbook.",
        ),
    ),
    Template(
        "pr-review",
        "Where am I with {p}'s pull request?",
        "Review of {p}'s PR: finished the API part, still need to check the tests.",
        rows("x=auth", "x=billing", "x=export"),
        older="Review of {p}'s PR: queued.",
        distractors=(
            "{p} opened a pull request for the {x} refactor.",
            "Pull requests need two approvals.",
            "{q} already approved {p}'s PR.",
            "Where possible, keep pull requests small.",
        ),
    ),
    Template(
        "trip-plan",
        "What's left to sort out for the {x} trip?",
        "Trip {x}: flights booked, still need the hotel and the train to the venue.",
        rows("x=Berlin", "x=Tokyo", "x=Toronto"),
        older="Trip {x}: ask {p} for dates.",
        distractors=(
            "The {x} office has a new receptionist.",
            "{p} loved the food on the last {x} trip.",
            "Trip reports go to finance within a week.",
            "{q} is also going to {x} in spring.",
        ),
    ),
    Template(
        "config-tweak",
        "What was I changing in the {x} config?",
        "WIP: raising {x} worker count from 4 to 8, staging only, revert if p99 rises.",
        rows("x=nginx", "x=celery", "x=gunicorn"),
        older="WIP: {x} config untouched, waiting for approval.",
        distractors=(
            "The {x} config is generated from a template.",
            "{q} changed the {x} timeout last year.",
            "Config changes need a ticket.",
            "Production {x} runs on four nodes.",
        ),
    ),
)

# -- meaning: no shared word between the query and the answer --------------------------

MEANING = (
    Template(
        "credentials",
        "Where do we keep credentials?",
        "API keys live in Vault.",
        rows("x=_"),
        distractors=(
            "We keep the snacks in the kitchen cupboard.",
            "Credentials for the conference arrive by mail.",
            "Where we keep the old laptops is a mystery.",
            "{q} keeps a notebook of meeting notes.",
            "Badge credentials are printed at reception.",
        ),
    ),
    Template(
        "cat-food",
        "What does {p}'s pet eat?",
        "{p}'s cat Miso only touches salmon kibble.",
        rows("x=_"),
        distractors=(
            "{p} eats lunch at noon.",
            "The pet policy allows dogs on Fridays.",
            "What does the team want for dinner?",
            "{q} bought a pet camera.",
        ),
    ),
    Template(
        "outage-cause",
        "Why did the website go down?",
        "The load balancer certificate expired at midnight and nobody renewed it.",
        rows("x=_"),
        distractors=(
            "The website redesign went live in spring.",
            "Traffic went down after the holidays.",
            "Why did {q} leave early? A dentist appointment.",
            "The website footer lists the press contact.",
        ),
    ),
    Template(
        "allergy",
        "Is there anything {p} can't eat?",
        "{p} is allergic to peanuts.",
        rows("x=_"),
        distractors=(
            "{p} can't make the Thursday meeting.",
            "There is anything from pizza to sushi near the office.",
            "{q} can eat spicy food.",
            "Anything left in the fridge on Friday is thrown away.",
        ),
    ),
    Template(
        "deploy-how",
        "How do we ship code to production?",
        "Merges to main trigger a GitHub Actions workflow that rolls out to the cluster.",
        rows("x=_"),
        distractors=(
            "We ship the hardware kits by courier.",
            "Production of the video starts in May.",
            "{q} wrote code for the robot contest.",
            "How do we order new chairs? Ask facilities.",
        ),
    ),
    Template(
        "customer-unhappy",
        "Which client is upset with us?",
        "Acme's CTO complained twice about latency and threatened to churn.",
        rows("x=_"),
        distractors=(
            "The client library needs a new release.",
            "{q} was upset with the parking situation.",
            "Which browser does the QA team use?",
            "The email client crashes on large attachments.",
        ),
    ),
    Template(
        "vacation",
        "When is {p} off work?",
        "{p} will be on holiday in Portugal from July 3 to July 17.",
        rows("x=_"),
        distractors=(
            "{p} works from the Lisbon office.",
            "Work on the mobile app starts soon.",
            "{q} turned the old server off.",
            "When is the next town hall?",
        ),
    ),
    Template(
        "backup",
        "How do we recover lost data?",
        "Nightly snapshots go to S3 with 30-day retention; restore them with the runbook script.",
        rows("x=_"),
        distractors=(
            "The lost and found box is at reception.",
            "Data science hired two interns.",
            "{q} recovered from the flu.",
            "How do we name feature branches? Ticket number first.",
        ),
    ),
    Template(
        "sick",
        "Why is {p} not around today?",
        "{p} called in with a fever this morning.",
        rows("x=_"),
        distractors=(
            "{p} is not a fan of open offices.",
            "Today the cafeteria serves curry.",
            "{q} is around until five.",
            "Why the build is red: a flaky test.",
        ),
    ),
    Template(
        "money-left",
        "How much budget remains for marketing?",
        "Ads spend so far is 38k of the 50k allotted for the year.",
        rows("x=_"),
        distractors=(
            "Marketing wants a new logo.",
            "The budget meeting remains on Thursday.",
            "{q} asked how much the conference booth costs.",
            "Marketing emails go out on Tuesdays.",
        ),
    ),
    Template(
        "language-learning",
        "What language is {p} studying?",
        "{p} practises Japanese with Duolingo every morning and has a tutor on Sundays.",
        rows("x=_"),
        distractors=(
            "{p} is studying the Q3 numbers.",
            "The codebase language is TypeScript.",
            "{q} speaks three languages.",
            "Language settings are in the profile page.",
        ),
    ),
)

# -- keywords: an exact rare term among look-alikes ------------------------------------

KEYWORDS = (
    Template(
        "orm",
        "Which service uses {x}?",
        "The billing backend talks to Postgres through {x}.",
        rows("x=TypeORM|a=Prisma|b=Sequelize", "x=SQLAlchemy|a=Django ORM|b=Peewee"),
        distractors=(
            "The auth service uses {a} as its ORM.",
            "{b} migrations run on every deploy of the search service.",
            "Which service owns the user table? Identity.",
            "The reporting service uses raw SQL queries.",
        ),
    ),
    Template(
        "error-code",
        "What does error {x} mean?",
        "{x} is returned when the payment provider rejects the card's currency.",
        rows("x=E4711|a=E4712|b=E4017", "x=ERR_QUOTA_7|a=ERR_QUOTA_5|b=ERR_RATE_7"),
        distractors=(
            "{a} means the card has expired.",
            "{b} happens when the session token is missing.",
            "Error messages are translated into six languages.",
            "What does the red banner mean? An incident is open.",
        ),
    ),
    Template(
        "ticket",
        "What is ticket {x} about?",
        "{x}: the export button ignores the date filter.",
        rows("x=PLAT-2231|a=PLAT-2213|b=PLAT-3221", "x=MOB-778|a=MOB-787|b=WEB-778"),
        distractors=(
            "{a}: the import wizard skips empty rows.",
            "{b}: dark mode contrast on the settings page.",
            "Tickets about exports go to the data team.",
            "{q} closed forty tickets this sprint.",
        ),
    ),
    Template(
        "flag",
        "Who owns the {x} flag?",
        "{p} owns {x}, and it stays off until the audit.",
        rows(
            "x=new_checkout_v2|a=new_checkout_v1|b=checkout_banner",
            "x=search_rerank|a=search_rerank_beta|b=search_suggest",
        ),
        distractors=(
            "{a} was removed after the rollout.",
            "{q} owns {b}.",
            "Feature flags are managed in LaunchDarkly.",
            "Who owns the staging environment? The platform team.",
        ),
    ),
    Template(
        "host",
        "What runs on {x}?",
        "{x} hosts the nightly ETL and the reporting database.",
        rows(
            "x=db-prod-07|a=db-prod-06|b=db-stage-07", "x=k8s-node-12|a=k8s-node-21|b=k8s-edge-12"
        ),
        distractors=(
            "{a} hosts the read replica for the API.",
            "{b} is a test box for the migration.",
            "The nightly jobs run at 02:00 UTC.",
            "Servers are named after their role and number.",
        ),
    ),
    Template(
        "library-version",
        "Why are we pinned to {x}?",
        "We pin {x} because later versions break the PDF renderer.",
        rows("x=pandas 1.5.3|a=numpy 1.26|b=pandas 2.2", "x=react 17.0.2|a=react-dom 18|b=next 13"),
        distractors=(
            "{a} is pinned for the Python 3.9 workers.",
            "We tried {b} and reverted because of a memory regression.",
            "Why are dependencies pinned at all? Reproducible builds.",
            "Dependabot opens upgrade PRs every Monday.",
        ),
    ),
    Template(
        "acronym",
        "Who is the contact for {x}?",
        "{p} is our contact at {x} for the data-sharing agreement.",
        rows("x=NHS Digital|a=NHS England|b=HMRC", "x=Fraunhofer IIS|a=Fraunhofer ISE|b=TU Berlin"),
        distractors=(
            "{q} is the contact for {a}.",
            "The {b} contact left in March.",
            "Contacts are stored in the CRM.",
            "Who is the contact for press? Comms.",
        ),
    ),
    Template(
        "sku",
        "How many {x} units are in stock?",
        "Warehouse count: 318 units of {x}.",
        rows("x=SKU-4471-BLK|a=SKU-4471-WHT|b=SKU-4417-BLK", "x=HX-220|a=HX-200|b=HX-2200"),
        distractors=(
            "Warehouse count: 42 units of {a}.",
            "{b} is discontinued.",
            "Stock levels are synced hourly.",
            "How many units ship per pallet? Forty-eight.",
        ),
    ),
    Template(
        "command",
        "What does `{x}` do?",
        "`{x}` rebuilds the search index from the primary database.",
        rows(
            "x=make reindex|a=make index-check|b=make rebuild",
            "x=norax check --repair|a=norax check|b=norax export",
        ),
        distractors=(
            "`{a}` only reports stale rows.",
            "`{b}` is what CI calls before the tests.",
            "The Makefile has twenty targets.",
            "What does the search team do on Fridays? Demos.",
        ),
    ),
    Template(
        "email-handle",
        "Who is behind {x}?",
        "{x} is {p}'s account for the open-source work.",
        rows(
            "x=@nightowl_dev|a=@nightowl|b=@dev_nightowl",
            "x=ops-bot@corp.example|a=ops@corp.example|b=bot@corp.example",
        ),
        distractors=(
            "{a} belongs to a spam account.",
            "{b} was created by {q} for testing.",
            "Who is behind the new design? The brand agency.",
            "Accounts for open-source work need approval.",
        ),
    ),
)
