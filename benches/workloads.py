"""Workloads whose fingerprints are close together: the corpora where cost per document grows.

The published dedup figures (benches/dedup.py) were measured on documents whose fingerprints are
far apart. These generators make the opposite, each deterministic in ``seed`` and written as
JSONL ``{"id", "text"}`` (real text from the Debian packages that benches/corpus.py loads):

- ``same-domain-long``: English windows of 500-5,000 characters over one domain (the Python
  documentation sources, the English Debian Reference and the English Debian Handbook). The
  first windows cut the texts in their own order; once those are used up, each further pass cuts
  windows from a fresh shuffle of the same paragraphs, so no two windows overlap by accident.
  ``copy_share`` of the documents are edited copies (:func:`corpus.add_noise`), a quarter of
  those exact.
- ``templated``: short notifications (verification codes, bank debits, parcel pickups,
  appointments, login alerts...) in Chinese and English from :data:`TEMPLATES`, with numbers,
  names, amounts, dates and codes drawn at random. Templates are drawn with Zipf weights
  (``skew``), so a few are hot; in some the fills are a small part of the text (near-copies of
  each other), in others most of it.
- ``families``: repost families: base sentences (short Chinese texts of corpus.py and English
  sentences of its long pool), each copied ``copies`` times with 0-3 random character edits.
- ``one-paragraph``: ``n`` copies of one paragraph, each with one random character edit.

Each generator returns the texts and, per text, the base it was made from (``origin``): the
*planted* copies are the texts beyond the first of each origin. Whether two texts are true
near-copies (5-gram Jaccard >= 0.8) is measured, not assumed: benches/bounded.py computes it
exactly on a sample (a 3-character edit of a 20-character sentence is no near-copy; two fills of
one long template are).

    python benches/workloads.py templated --n 20000 --out /tmp/t.jsonl
"""

from __future__ import annotations

import glob
import gzip
import inspect
import json
import os
import random
import re
import string
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Callable

import corpus

# Bump when a generator's output changes, so that cached files are rebuilt.
VERSION = 1

DEBREF_EN = f"{corpus.DEBREF_DIR}/debian-reference.en.txt.gz"


@dataclass
class Workload:
    """Generated texts, each with the id of the base it was made from."""

    texts: list[str]
    origin: list[int]

    @property
    def planted_copies(self) -> int:
        """Texts beyond the first of each origin (made as copies or edits of another)."""
        return len(self.texts) - len(set(self.origin))


def _shuffled(texts: list[str], origin: list[int], rng: random.Random) -> Workload:
    order = list(range(len(texts)))
    rng.shuffle(order)
    return Workload([texts[i] for i in order], [origin[i] for i in order])


# ---------------------------------------------------------------------------------------------
# same-domain-long


@cache
def english_paragraphs() -> tuple[tuple[str, ...], ...]:
    """Paragraphs of the three English sources, one tuple per source, in reading order."""
    # corpus.english_long() has the Python docs already cut and exact-deduplicated; its chunks
    # are joined runs of paragraphs, split again here so that passes can shuffle paragraphs.
    python_docs = [p for chunk in corpus.english_long() for p in _paragraphs(chunk)]
    corpus._need(DEBREF_EN, "debian-reference-en")
    with gzip.open(DEBREF_EN, "rt", encoding="utf-8", errors="replace") as f:
        reference = _paragraphs(f.read())
    corpus._need(corpus.HANDBOOK, "debian-handbook")
    handbook: list[str] = []
    for path in sorted(glob.glob(f"{corpus.HANDBOOK}/*.html")):
        with open(path, encoding="utf-8", errors="replace") as f:
            handbook.extend(_paragraphs(corpus._strip_tags(f.read())))
    return tuple(python_docs), tuple(reference), tuple(handbook)


def _paragraphs(text: str) -> list[str]:
    # Paragraphs of at least a few words: lone headings and rules repeat across documents.
    return [
        p.strip() for p in re.split(r"\n\s*\n", text) if len(p.strip()) >= 40 and " " in p.strip()
    ]


def same_domain_long(
    n: int,
    seed: int,
    copy_share: float = 0.1,
    exact_share: float = 0.25,
    min_chars: int = 500,
    max_chars: int = 5000,
    max_strength: float = 0.5,
) -> Workload:
    """``n`` English windows of ``min_chars``..``max_chars``; ``copy_share`` of them edited
    copies of another window (``exact_share`` of the copies unedited; the others with
    :func:`corpus.add_noise` of strength up to ``max_strength``)."""
    _check_share("copy_share", copy_share)
    _check_share("exact_share", exact_share)
    if not 0 < min_chars <= max_chars:
        raise ValueError(f"need 0 < min_chars <= max_chars, got {min_chars}, {max_chars}")
    rng = random.Random(f"same-domain-long:{seed}")
    n_copies = int(n * copy_share)
    n_base = n - n_copies
    sources = [list(s) for s in english_paragraphs()]
    texts: list[str] = []
    passes = 0
    while len(texts) < n_base:
        if passes == 0:
            streams = ["\n\n".join(s) for s in sources]
        else:
            paragraphs = [p for s in sources for p in s]
            rng.shuffle(paragraphs)
            streams = ["\n\n".join(paragraphs)]
        passes += 1
        windows: list[str] = []
        for stream in streams:
            pos = rng.randrange(min_chars)  # passes do not cut at the same places
            while True:
                size = rng.randint(min_chars, max_chars)
                if pos + size > len(stream):
                    break
                windows.append(stream[pos : pos + size].strip())
                pos += size
        # A whole pass is cut, then sampled: every size of n draws from all three sources.
        rng.shuffle(windows)
        texts.extend(windows[: n_base - len(texts)])
    origin = list(range(n_base))
    for _ in range(n_copies):
        src = rng.randrange(n_base)
        if rng.random() < exact_share:
            texts.append(texts[src])
        else:
            donor = texts[rng.randrange(n_base)]
            texts.append(corpus.add_noise(texts[src], rng, donor, rng.uniform(0, max_strength)))
        origin.append(src)
    return _shuffled(texts, origin, rng)


def _check_share(name: str, value: float) -> None:
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {value}")


# ---------------------------------------------------------------------------------------------
# templated


# Notifications of the kinds that phones receive by the million. The fills are the {fields};
# each field's values come from FILLS. Long templates with a small fill are near-copies of each
# other (5-gram Jaccard >= 0.8); in the short ones the fills are most of the text.
TEMPLATES: tuple[str, ...] = (
    # Chinese
    "【{bank_zh}】您的验证码为{code6}，5分钟内有效，请勿泄露给他人。",
    "【{app_zh}】验证码：{code4}",
    "{code6}（{app_zh}动态验证码），请在页面中输入完成验证。如非本人操作，请忽略本短信。",
    "【{bank_zh}】您尾号{last4}的储蓄卡于{month}月{day}日{hh}:{mm}支出（消费）{amount}元，"
    "交易商户：{merchant_zh}，可用余额{balance}元。如有疑问请致电客服热线{hotline}。",
    "【{bank_zh}】{name_zh}，您尾号{last4}的账户于{month}月{day}日收到转账{amount}元，"
    "付款方：{name_zh_b}。",
    "【{courier_zh}】您的快递已到{station_zh}，取件码{pickup}，请于{month}月{day}日前凭取件码"
    "领取，超时将退回寄件人。如有疑问请联系快递员{phone_zh}。",
    "【{locker_zh}】取件码{pickup}，{station_zh}。",
    "【{hospital_zh}】尊敬的{name_zh}，您已成功预约{month}月{day}日{halfday_zh}{dept_zh}"
    "{doctor_zh}医生的门诊，就诊序号{seq}。请携带身份证件提前30分钟到院取号，改约或取消请"
    "至少提前一天在公众号中操作，爽约三次将暂停预约资格。",
    "【{app_zh}】您的账号于{month}月{day}日{hh}:{mm}在{city_zh}（IP {ip}）登录，"
    "如非本人操作，请立即修改密码。",
    "【{bank_zh}信用卡】您{month}月账单金额{amount}元，最低还款{min_pay}元，到期还款日"
    "{month_b}月{day}日。请按时还款，以免产生利息和影响您的信用记录；如已还款请忽略本短信。"
    "自动还款客户请确保还款账户余额充足。",
    "【中国{telco_zh}】尊敬的客户，截至{month}月{day}日{hh}时，您的账户余额为{small_amount}元，"
    "本月已使用流量{gb}GB，剩余{gb_b}GB。",
    "【{food_app_zh}】您的订单已由骑手{name_zh}接单，预计{hh}:{mm}送达，骑手电话{phone_zh}。",
    "【{shop_zh}】亲爱的会员，{month}月{day}日全场满{spend}减{discount}，您有{count}张优惠券"
    "即将过期，点击 {url} 领取，回T退订。",
    "【铁路客服】订单{order}，{name_zh}您已购{month}月{day}日{train}次{car_no}车{seat_no}号，"
    "{station_from_zh}站{hh}:{mm}开，检票口{gate}，请携带购票时所使用的有效身份证件原件"
    "乘车，祝您旅途愉快。",
    "您正在重置密码，验证码{code6}。",
    "【{app_zh}】{code6}",
    # English
    "Your {app} verification code is {code6}. It expires in 10 minutes. "
    "Do not share this code with anyone, including {app} staff.",
    "{code6} is your {app} code.",
    "{app}: {code4}",
    "{bank}: A debit of ${amount} was made from your account ending {last4} on {date} at "
    "{merchant}. Available balance: ${balance}. If you did not make this transaction, "
    "call us at {phone} immediately.",
    "{bank} Alert: Direct deposit of ${amount} posted to account x{last4} on {date}.",
    "{courier}: Your parcel {tracking} is ready for pickup at {store}, {street}. Bring this "
    "code: {pickup}. Please collect it by {date} or it will be returned to the sender.",
    "{courier}: package {tracking} out for delivery today between {hh}:00 and {hh_b}:00.",
    "Hi {first}, this is a reminder of your appointment with Dr. {last} at {clinic} on "
    "{weekday}, {date} at {time}. Reply C to confirm or R to reschedule. Please arrive 15 "
    "minutes early and bring your insurance card and a list of your current medications.",
    "New sign-in to your {app} account from {device} in {city} ({ip}) on {date} at {time}. "
    "If this wasn't you, reset your password at {url}.",
    "Use {code8} to reset your {app} password.",
    "{bank}: Your card ending {last4} was declined at {merchant} for ${amount}. Reply YES if "
    "you attempted this purchase or NO if you did not.",
    "Your {utility} bill of ${amount} for account {account} is due on {date}. Pay online at "
    "{url} or reply PAY to pay now with your card on file. Msg & data rates may apply. "
    "Reply STOP to opt out, HELP for help.",
    "Your {ride_app} driver {first} is arriving in {minutes} min in a {color} {car} ({plate}).",
    "Good news, {first}! Your order #{order} has shipped and is expected to arrive on {date}. "
    "Track it at {url}.",
    "{pharmacy}: Your prescription #{rx} is ready for pickup at the {city} store. It will be "
    "held until {date}. Questions? Call {phone}.",
    "OTP {code6}",
    "{first}, your table for {party} at {restaurant} is confirmed for {time} tonight.",
)

_SURNAMES_ZH = "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘"
_GIVEN_ZH = "伟芳娜敏静丽强磊军洋勇艳杰娟涛明超秀霞平刚桂英华玉萍红玲兰飞建国志文辉鹏宇浩然"
_FIRST_EN = (
    "James Mary Robert Patricia John Jennifer Michael Linda David Elizabeth William Barbara "
    "Richard Susan Joseph Jessica Thomas Sarah Charles Karen Daniel Nancy Matthew Lisa Anthony "
    "Betty Mark Sandra Steven Ashley Paul Emily Andrew Donna Joshua Michelle Kevin Carol"
).split()
_LAST_EN = (
    "Smith Johnson Williams Brown Jones Garcia Miller Davis Rodriguez Martinez Hernandez Lopez "
    "Gonzalez Wilson Anderson Thomas Taylor Moore Jackson Martin Lee Perez Thompson White Harris "
    "Sanchez Clark Ramirez Lewis Robinson Walker Young Allen King Wright Scott Torres Nguyen"
).split()
_CITIES_EN = (
    "Springfield Riverton Fairview Georgetown Clinton Salem Madison Franklin Greenville Bristol "
    "Oakland Ashland Burlington Manchester Milton Newport Oxford Dover Hudson Kingston"
).split()
_CITIES_ZH = (
    "北京 上海 广州 深圳 杭州 成都 武汉 南京 重庆 西安 苏州 天津 长沙 郑州 青岛 沈阳".split()
)


def _name_zh(rng: random.Random) -> str:
    given = "".join(rng.choice(_GIVEN_ZH) for _ in range(rng.randint(1, 2)))
    return rng.choice(_SURNAMES_ZH) + given


def _digits(k: int) -> Callable[[random.Random], str]:
    return lambda rng: "".join(rng.choice(string.digits) for _ in range(k))


def _pick(options: Sequence[str]) -> Callable[[random.Random], str]:
    return lambda rng: rng.choice(options)


def _money(lo: float, hi: float) -> Callable[[random.Random], str]:
    # Log-uniform: small amounts are common, large ones rare.
    return lambda rng: f"{lo * (hi / lo) ** rng.random():,.2f}"


def _date(rng: random.Random) -> str:
    month = rng.choice("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split())
    return f"{month} {rng.randint(1, 28)}"


def _time(rng: random.Random) -> str:
    return f"{rng.randint(1, 12)}:{rng.randrange(0, 60, 5):02d} {rng.choice(('AM', 'PM'))}"


def _url(rng: random.Random) -> str:
    host = rng.choice(("t.cn", "u.to", "go.link", "dwz.cn", "bit.ly"))
    return f"https://{host}/" + "".join(
        rng.choice(string.ascii_letters + string.digits) for _ in range(rng.randint(5, 8))
    )


def _ip(rng: random.Random) -> str:
    return ".".join(str(rng.randint(1, 254)) for _ in range(4))


FILLS: dict[str, Callable[[random.Random], str]] = {
    "code4": _digits(4),
    "code6": _digits(6),
    "code8": _digits(8),
    "last4": _digits(4),
    "pickup": lambda rng: f"{rng.randint(1, 30)}-{rng.randint(1, 9)}-{rng.randint(1000, 9999)}",
    "seq": lambda rng: str(rng.randint(1, 120)),
    "gate": lambda rng: f"{rng.randint(1, 30)}{rng.choice('AB')}",
    "count": lambda rng: str(rng.randint(1, 9)),
    "gb": lambda rng: f"{rng.uniform(0, 60):.2f}",
    "gb_b": lambda rng: f"{rng.uniform(0, 60):.2f}",
    "month": lambda rng: str(rng.randint(1, 12)),
    "month_b": lambda rng: str(rng.randint(1, 12)),
    "day": lambda rng: str(rng.randint(1, 28)),
    "hh": lambda rng: f"{rng.randint(6, 22):02d}",
    "hh_b": lambda rng: f"{rng.randint(6, 22):02d}",
    "mm": lambda rng: f"{rng.randrange(60):02d}",
    "minutes": lambda rng: str(rng.randint(1, 15)),
    "party": lambda rng: str(rng.randint(2, 8)),
    "amount": _money(1, 50_000),
    "balance": _money(10, 200_000),
    "min_pay": _money(10, 2_000),
    "small_amount": _money(0.5, 300),
    "spend": lambda rng: str(rng.choice((99, 199, 299, 399, 599))),
    "discount": lambda rng: str(rng.choice((10, 20, 30, 50, 100))),
    "hotline": _pick(("95588", "95533", "95599", "95566", "95555", "95559")),
    "phone_zh": lambda rng: "1" + rng.choice("3456789") + _digits(9)(rng),
    "phone": lambda rng: (
        f"({rng.randint(200, 989)}) {rng.randint(200, 999)}-{rng.randint(0, 9999):04d}"
    ),
    "ip": _ip,
    "url": _url,
    "order": _digits(12),
    "tracking": lambda rng: (
        "1Z" + "".join(rng.choice(string.ascii_uppercase + string.digits) for _ in range(16))
    ),
    "account": _digits(10),
    "rx": _digits(7),
    "plate": lambda rng: (
        "".join(rng.choice(string.ascii_uppercase) for _ in range(3)) + "-" + _digits(4)(rng)
    ),
    "train": lambda rng: rng.choice("GDKZT") + str(rng.randint(1, 9999)),
    "car_no": lambda rng: f"{rng.randint(1, 16):02d}",
    "seat_no": lambda rng: f"{rng.randint(1, 20):02d}{rng.choice('ABCDF')}",
    "name_zh": _name_zh,
    "name_zh_b": _name_zh,
    "doctor_zh": _name_zh,
    "city_zh": _pick(_CITIES_ZH),
    "station_from_zh": lambda rng: rng.choice(_CITIES_ZH) + rng.choice(("", "南", "东", "西")),
    "first": _pick(_FIRST_EN),
    "last": _pick(_LAST_EN),
    "city": _pick(_CITIES_EN),
    "date": _date,
    "time": _time,
    "weekday": _pick("Monday Tuesday Wednesday Thursday Friday Saturday".split()),
    "bank_zh": _pick(("工商银行", "建设银行", "农业银行", "中国银行", "招商银行", "交通银行")),
    "app_zh": _pick(("淘宝", "支付宝", "美团", "京东", "微博", "小红书", "滴滴出行", "拼多多")),
    "courier_zh": _pick(("顺丰速运", "中通快递", "圆通速递", "韵达快递", "申通快递", "京东物流")),
    "locker_zh": _pick(("丰巢", "菜鸟驿站", "速递易")),
    "station_zh": lambda rng: (
        rng.choice(("阳光花园", "幸福里", "锦绣小区", "学府路", "新村"))
        + f"{rng.randint(1, 30)}号楼"
        + rng.choice(("东门", "南门", "驿站", "快递柜"))
    ),
    "hospital_zh": lambda rng: (
        rng.choice(_CITIES_ZH) + rng.choice(("市第一", "市中心", "人民")) + "医院"
    ),
    "halfday_zh": _pick(("上午", "下午")),
    "dept_zh": _pick(("内科", "外科", "儿科", "眼科", "口腔科", "皮肤科", "骨科", "妇产科")),
    "merchant_zh": _pick(("美团外卖", "盒马鲜生", "滴滴出行", "中国石化", "星巴克", "永辉超市")),
    "telco_zh": _pick(("移动", "联通", "电信")),
    "food_app_zh": _pick(("美团外卖", "饿了么")),
    "shop_zh": _pick(("优衣库", "屈臣氏", "名创优品", "苏宁易购", "国美电器")),
    "app": _pick(("Chirp", "Paylo", "Snapcart", "Rydr", "Mailbox", "Vaultly", "Linkup", "Zumo")),
    "bank": _pick(("First Harbor Bank", "Unity Credit Union", "Summit Savings", "Pine State")),
    "merchant": _pick(("QUICKMART #221", "FUEL STOP 88", "CITY GROCERS", "ONLINE PURCHASE")),
    "courier": _pick(("ParcelGo", "SwiftShip", "BoxPost", "Rapid Parcel")),
    "store": _pick(("Corner Market", "Main St Pharmacy", "QuickStop", "Lakeside Locker")),
    "street": lambda rng: (
        f"{rng.randint(1, 9999)} "
        + rng.choice(("Oak", "Maple", "Main", "Cedar", "Elm", "Park"))
        + rng.choice((" St", " Ave", " Rd", " Blvd"))
    ),
    "clinic": _pick(("Northside Family Clinic", "Lakeview Dental", "Westgate Medical Center")),
    "device": _pick(("Chrome on Windows", "Safari on iPhone", "Firefox on Linux", "an Android")),
    "utility": _pick(("electric", "water", "gas", "internet", "phone")),
    "ride_app": _pick(("Rydr", "GoCab", "Zipride")),
    "color": _pick(("white", "black", "silver", "grey", "blue", "red")),
    "car": _pick(("Toyota Camry", "Honda Civic", "Ford Focus", "Kia Soul", "Tesla Model 3")),
    "pharmacy": _pick(("CarePlus Pharmacy", "HealthMart", "Corner Drug")),
    "restaurant": _pick(("Luigi's", "The Green Fork", "Golden Dragon", "Blue Harbor Grill")),
}


def _fields(template: str) -> list[str]:
    return [name for _, name, _, _ in string.Formatter().parse(template) if name]


def templated(n: int, seed: int, templates: int = 0, skew: float = 1.0) -> Workload:
    """``n`` notifications from the first ``templates`` of :data:`TEMPLATES` (0: all), drawn
    with Zipf weights ``1 / rank ** skew`` over a seeded order of the templates."""
    if templates < 0 or templates > len(TEMPLATES):
        raise ValueError(f"templates must be in 0..{len(TEMPLATES)}, got {templates}")
    if skew < 0:
        raise ValueError(f"skew must be >= 0, got {skew}")
    rng = random.Random(f"templated:{seed}")
    chosen = list(TEMPLATES[: templates or len(TEMPLATES)])
    rng.shuffle(chosen)  # which templates are hot depends on the seed
    weights = [1.0 / (rank + 1) ** skew for rank in range(len(chosen))]
    fields = [_fields(t) for t in chosen]
    texts: list[str] = []
    for which in rng.choices(range(len(chosen)), weights=weights, k=n):
        values = {name: FILLS[name](rng) for name in fields[which]}
        texts.append(chosen[which].format(**values))
    # Every message is its own origin: which ones are near-copies is measured (bounded.py).
    return Workload(texts, list(range(n)))


# ---------------------------------------------------------------------------------------------
# families and one paragraph


def _edit(text: str, rng: random.Random, edits: int) -> str:
    """``text`` with ``edits`` single-character substitutions, insertions or deletions, the new
    characters taken from the text itself (so that scripts stay as they are)."""
    chars = list(text)
    for _ in range(edits):
        op = rng.randrange(3) if len(chars) > 1 else 1
        pos = rng.randrange(len(chars))
        if op == 0:
            chars[pos] = rng.choice(chars)
        elif op == 1:
            chars.insert(pos, rng.choice(chars))
        else:
            del chars[pos]
    return "".join(chars)


@cache
def english_sentences() -> tuple[str, ...]:
    """Sentences of 40..200 characters of corpus.english_long(), whitespace collapsed."""
    out: dict[str, None] = {}
    for chunk in corpus.english_long():
        for s in re.split(r"(?<=[.!?])\s+", " ".join(chunk.split())):
            if 40 <= len(s) <= 200 and s[0].isupper():
                out.setdefault(s, None)
    return tuple(out)


def families(
    n: int, seed: int, copies: int = 300, max_edits: int = 3, zh_share: float = 0.5
) -> Workload:
    """``n`` texts in families of ``copies``: each base sentence (Chinese with probability
    ``zh_share``) copied with 0..``max_edits`` random character edits per copy."""
    if copies < 1:
        raise ValueError(f"copies must be >= 1, got {copies}")
    _check_share("zh_share", zh_share)
    rng = random.Random(f"families:{seed}")
    zh, en = list(corpus.chinese_short()), list(english_sentences())
    rng.shuffle(zh)
    rng.shuffle(en)
    n_families = -(-n // copies)
    bases: list[str] = []
    for _ in range(n_families):
        pool, sep = (zh, "") if rng.random() < zh_share else (en, " ")
        if pool:
            bases.append(pool.pop())
        else:  # more families than sentences: join two (drawn again), a distinct text anyway
            source = corpus.chinese_short() if sep == "" else english_sentences()
            bases.append(rng.choice(source) + sep + rng.choice(source))
    texts: list[str] = []
    origin: list[int] = []
    for i in range(n):
        family = i % n_families
        texts.append(_edit(bases[family], rng, rng.randint(0, max_edits)))
        origin.append(family)
    return _shuffled(texts, origin, rng)


def one_paragraph(n: int, seed: int, min_chars: int = 400, max_chars: int = 1500) -> Workload:
    """``n`` copies of one English paragraph of ``min_chars``..``max_chars`` (chosen by
    ``seed``), each with one random character edit."""
    rng = random.Random(f"one-paragraph:{seed}")
    fitting = [p for p in corpus.english_long() if min_chars <= len(p) <= max_chars]
    if not fitting:
        raise ValueError(f"no paragraph of {min_chars}..{max_chars} characters")
    paragraph = rng.choice(fitting)
    return Workload([_edit(paragraph, rng, 1) for _ in range(n)], [0] * n)


GENERATORS: dict[str, Callable[..., Workload]] = {
    "same-domain-long": same_domain_long,
    "templated": templated,
    "families": families,
    "one-paragraph": one_paragraph,
}


def parameters(name: str) -> dict[str, Any]:
    """The tunable parameters of generator ``name`` and their defaults (beyond n and seed)."""
    sig = inspect.signature(GENERATORS[name])
    return {p: v.default for p, v in sig.parameters.items() if p not in ("n", "seed")}


def parse_params(name: str, items: Sequence[str]) -> dict[str, Any]:
    """``["copies=100", ...]`` as typed keyword arguments of generator ``name``."""
    known = parameters(name)
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or key not in known:
            raise ValueError(
                f"{name} takes {', '.join(f'{k}=' for k in known) or 'no parameters'}; got {item!r}"
            )
        out[key] = type(known[key])(value)
    return out


def write(name: str, path: str, n: int, seed: int, **params: Any) -> dict[str, Any]:
    """Generate workload ``name`` to ``path`` as JSONL; returns its description (also written
    next to it as ``path + ".meta.json"``; each document's origin in ``path + ".origin"``)."""
    if name not in GENERATORS:
        raise ValueError(f"workload must be one of {', '.join(GENERATORS)}; got {name!r}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    work = GENERATORS[name](n, seed, **params)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for i, text in enumerate(work.texts):
            f.write(json.dumps({"id": i, "text": text}, ensure_ascii=False) + "\n")
    meta = {
        "workload": name,
        "docs": n,
        "seed": seed,
        "params": {**parameters(name), **params},
        "planted_copies": work.planted_copies,
        "origins": len(set(work.origin)),
        "chars": sum(len(t) for t in work.texts),
        "version": VERSION,
    }
    with open(path + ".meta.json", "w", encoding="utf-8") as f:
        json.dump(meta, f)
    with open(path + ".origin", "w", encoding="utf-8") as f:  # one line per document
        f.writelines(f"{o}\n" for o in work.origin)
    os.replace(tmp, path)
    return meta


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("workload", choices=list(GENERATORS))
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--param", action="append", default=[], help="KEY=VALUE of the generator")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    meta = write(
        args.workload, args.out, args.n, args.seed, **parse_params(args.workload, args.param)
    )
    print(json.dumps(meta, ensure_ascii=False))


if __name__ == "__main__":
    main()
