"""Generates the embedded IMCS-V2-format sample (synthetic; invented by the tffre authors).

    python data/imcs_sample/generate.py            # rewrites the three JSON files
    python data/imcs_sample/generate.py --vectors  # also retrains w2v_sample.txt

The dialogues follow the IMCS-V2 schema exactly (see README.md) but every
text is produced from the templates below with ``random.Random(seed)``: no
real patient is behind any of them. Design goals: 10 pediatric diseases with
overlapping symptoms, realistic doctor/patient turn order, negated ("没有发烧",
"不咳嗽") and uncertain symptoms, repeated norms in one sentence, and all 16
dialogue acts. A symptom's ``symptom_type`` is the dialogue-level status of
that symptom (as in IMCS), so a doctor's question about a symptom the patient
has is labelled "1": the symptom task is learnable but not trivial.

Held-out phrasings, so that a score on dev or test measures generalisation and not
memorisation: every phrasing pool (:data:`PHRASES`: the carrier of a symptom question or
answer, a greeting, a request, an age, a duration, ...) has *seen* phrasings and
*held-out* ones. A training dialogue uses seen phrasings only; a dev or test dialogue takes
each phrase from the held-out phrasings with probability :data:`HELD_OUT_RATE`, else from
the seen ones. The symptom surface forms (:data:`SURFACE`), drugs, examinations, causes
and diagnoses are shared by every split: they are what a model can learn from training. A
held-out phrasing carries the same kind of cue as the seen ones ("没", "不" for a negated
symptom, "说不准"-like words for an uncertain one) in new words and orders. 378 of the 1,949
test sentences (19.4%) are verbatim training sentences, against 1,915 of 2,002 (95.7%) before
the phrasings were held out; ``python -m tffre data check --dataset imcs`` prints the figure.
"""

import argparse
import json
import os
import random
import re

HERE = os.path.dirname(os.path.abspath(__file__))
# The sample ships as package data, so that a non-editable install finds it.
OUT_DIR = os.path.join(HERE, "..", "..", "tffre", "resources", "imcs_sample")
SEED = 20241017
PER_DISEASE = {"train": 32, "dev": 6, "test": 10}
HELD_OUT = ("dev", "test")   # the splits whose dialogues draw held-out phrasings
HELD_OUT_RATE = 0.8          # the chance a held-out split's phrase is a held-out phrasing

# Surface forms a parent or doctor might use for each normalised symptom.
SURFACE = {
    "咳嗽": ["咳嗽"], "干咳": ["干咳"], "痰": ["有痰", "嗓子有痰"], "咳痰": ["咳痰"],
    "发热": ["发烧", "发热"], "低热": ["低烧", "低热"], "高热": ["高烧", "高热"],
    "鼻流涕": ["流鼻涕", "流涕"], "鼻塞": ["鼻塞", "鼻子不通气"], "喷嚏": ["打喷嚏"],
    "喘息": ["喘息", "喘得厉害"], "痰鸣音": ["痰鸣音", "嗓子呼噜响"], "呼吸急促": ["呼吸急促", "呼吸很快"],
    "啰音": ["啰音"], "腹泻": ["拉肚子", "腹泻"], "稀便": ["大便稀", "稀便"], "水样便": ["水样便"],
    "呕吐": ["呕吐", "吐奶"], "腹胀": ["肚子胀", "腹胀"], "腹痛": ["肚子疼", "腹痛"],
    "食欲不振": ["不爱吃饭", "胃口差", "食欲不振"], "口臭": ["口臭", "嘴里有味"], "积食": ["积食"],
    "大便酸臭": ["大便酸臭"], "便秘": ["便秘", "拉不出来"], "大便干燥": ["大便干", "大便干燥"],
    "肛裂": ["肛裂"], "哭闹": ["哭闹", "总是哭"], "皮肤黄": ["皮肤黄", "皮肤发黄"],
    "眼发黄": ["眼睛发黄", "眼发黄"], "胆红素高": ["胆红素高", "黄疸值高"], "嗜睡": ["嗜睡", "老是睡"],
    "精神软": ["精神不好", "没精神"], "寒战": ["寒战", "发抖"], "出汗": ["出汗", "出汗多"],
    "嗓子沙哑": ["嗓子沙哑", "声音哑"], "咽喉不适": ["嗓子不舒服", "嗓子疼"], "皮疹": ["皮疹", "起疹子"],
}

DISEASES = {
    "小儿支气管炎": dict(main=["咳嗽", "痰", "喘息"], more=["发热", "痰鸣音", "鼻流涕"],
                   cause="支气管受到病毒或细菌感染", drug=["氨溴索口服液", "布地奈德"],
                   exam=["血常规", "胸片"], vague="气管方面的炎症"),
    "小儿发热": dict(main=["发热", "高热"], more=["精神软", "寒战", "出汗", "食欲不振"],
                 cause="病毒感染引起的体温升高", drug=["布洛芬混悬液", "对乙酰氨基酚"],
                 exam=["血常规", "C反应蛋白"], vague="感染引起的发烧"),
    "小儿腹泻": dict(main=["腹泻", "稀便"], more=["水样便", "呕吐", "发热", "腹痛"],
                 cause="轮状病毒或者饮食不当", drug=["蒙脱石散", "口服补液盐", "益生菌"],
                 exam=["大便常规", "血常规"], vague="肠道的问题"),
    "上呼吸道感染": dict(main=["发热", "鼻塞", "咽喉不适"], more=["鼻流涕", "咳嗽", "喷嚏"],
                   cause="病毒从鼻咽部感染", drug=["小儿氨酚黄那敏颗粒", "布洛芬混悬液"],
                   exam=["血常规", "咽拭子"], vague="上面呼吸道的感染"),
    "小儿消化不良": dict(main=["腹胀", "食欲不振"], more=["口臭", "呕吐", "大便酸臭", "积食"],
                   cause="吃得太多或者不好消化", drug=["健胃消食片", "益生菌", "乳酸菌素片"],
                   exam=["大便常规"], vague="脾胃不和"),
    "小儿感冒": dict(main=["鼻流涕", "鼻塞", "喷嚏"], more=["咳嗽", "低热", "嗓子沙哑"],
                 cause="受凉以后病毒感染", drug=["小儿感冒颗粒", "小儿氨酚黄那敏颗粒"],
                 exam=["血常规"], vague="着凉了"),
    "小儿咳嗽": dict(main=["咳嗽", "干咳"], more=["痰", "咳痰", "嗓子沙哑", "咽喉不适"],
                 cause="咽喉或者气道受到刺激", drug=["小儿止咳糖浆", "氨溴索口服液"],
                 exam=["胸片", "血常规"], vague="呼吸道受刺激"),
    "新生儿黄疸": dict(main=["皮肤黄", "胆红素高"], more=["眼发黄", "嗜睡", "哭闹"],
                  cause="新生儿胆红素代谢还不成熟", drug=["茵栀黄口服液", "益生菌"],
                  exam=["经皮胆红素", "肝功能"], vague="胆红素的问题"),
    "小儿便秘": dict(main=["便秘", "大便干燥"], more=["腹痛", "哭闹", "肛裂", "腹胀"],
                 cause="膳食纤维和水分不够", drug=["乳果糖口服溶液", "开塞露", "益生菌"],
                 exam=["腹部B超"], vague="排便习惯的问题"),
    "小儿支气管肺炎": dict(main=["咳嗽", "发热", "喘息"], more=["呼吸急促", "啰音", "痰鸣音"],
                    cause="细菌或者支原体引起的肺部感染", drug=["阿奇霉素", "头孢克洛"],
                    exam=["胸片", "血常规", "支原体抗体"], vague="肺部的感染"),
}

# Symptoms a parent may deny with "不" + the surface form ("不咳嗽").
VERB_NORMS = ("咳嗽", "发热", "呕吐", "腹泻", "哭闹", "喘息")

# {pool: (seen phrasings, held-out phrasings)}. In a template, {s} is the symptom with its
# dialogue-level status, {s0} and {s1} the same symptom with status "0" and "1"; {d} a
# duration, {n} a number, {exam}, {drug} an examination and a drug (entities), {cause},
# {disease}, {vague} and {sx} plain text.
PHRASES = {
    "duration": (["一天", "两天", "三天", "四五天", "一周", "半个月"],
                 ["两三天", "五六天", "十来天", "一个星期", "好几天"]),
    "greeting": (["你好"], ["您好", "你好，我是儿科医生"]),
    "ask_age": (["宝宝多大了？", "孩子现在多大？"], ["孩子几岁了？", "宝宝年龄多大？"]),
    "age_days": (["出生{n}天"], ["刚出生{n}天", "生下来{n}天了"]),
    "age_months": (["{n}个月"], ["{n}个多月", "快{n}个月了"]),
    "age_years": (["{n}岁"], ["{n}岁了", "刚满{n}岁"]),
    "age_years_half": (["{n}岁半"], ["{n}岁半了"]),
    "ask_symptom": (["宝宝有没有{s}？", "{s}吗？", "有{s}的情况吗？"],
                    ["孩子有没有{s}？", "有没有{s}的情况？", "{s}了吗？", "最近{s}吗？"]),
    "present": (["有{s}，{d}了", "是的，{s}挺厉害的", "之前没有{s0}，这两天开始{s1}了", "有点{s}"],
                ["{s}有{d}了", "嗯，有{s}", "是的，{s}比较厉害", "这几天开始{s1}了",
                 "以前没有{s0}，最近开始{s1}了"]),
    "absent": (["没有{s}", "没有，也没{s}过"],
               ["一直没有{s}", "{s}倒是没有", "没有，没{s}过", "没有{s}的情况"]),
    "absent_verb": (["不{s}"], ["也不{s}", "一点也不{s}"]),
    "uncertain": (["不太确定有没有{s}", "好像有一点{s}，说不准"],
                  ["不太确定是不是{s}", "好像有点{s}，不太确定", "说不准有没有{s}"]),
    "also": (["对了，还{s1}"], ["另外还{s1}", "对了，还有点{s1}"]),
    "ask_exam": (["做过{exam}吗？"], ["查过{exam}没有？", "之前做{exam}了吗？"]),
    "exam_done": (["做了{exam}，说是有点问题"], ["查了{exam}，说是有些问题"]),
    "exam_not_done": (["还没做，吃了{drug}，没什么效果"], ["没去做，吃过{drug}，没什么用"]),
    "ask_cause": (["这是什么原因引起的呢？", "为什么会这样？"], ["怎么会这样呢？", "是什么引起的？"]),
    "cause_symptom": (["{s1}一般是{cause}引起的", "{s1}一般是{cause}"],
                      ["{s1}一般是因为{cause}", "{s1}多半是{cause}引起的"]),
    "cause": (["{cause}引起的", "{cause}"], ["主要是{cause}", "可能是{cause}导致的"]),
    "diagnose": (["考虑是{disease}", "从症状看，可能是{vague}"],
                 ["初步判断是{disease}", "看起来像是{vague}"]),
    "ask_drug": (["需要吃什么药吗？", "用什么药好？"], ["吃点什么药合适？", "要用药吗？"]),
    "drug": (["可以吃点{drug}"], ["建议用{drug}", "先吃{drug}试试"]),
    "ask_advice": (["需要去医院吗？", "要不要去医院看看？"], ["用不用去医院？", "得去医院看吗？"]),
    "advice": (["建议去医院查一下{exam}"], ["最好去医院做个{exam}", "可以到医院查查{exam}"]),
    "ask_precautions": (["平时需要注意什么？", "在家要注意些什么？"],
                        ["平常要注意哪些？", "护理上要注意什么？"]),
    "precautions": (["注意多喝水，饮食清淡", "注意保暖，不要着凉", "少吃多餐，不要吃油腻的",
                     "保持室内空气流通", "注意观察体温变化", "多晒太阳，按时喂奶"],
                    ["多给宝宝喝温水", "饮食以清淡为主", "晚上注意盖好被子",
                     "勤洗手，少去人多的地方"]),
    "thanks": (["好的，谢谢医生", "明白了", "嗯嗯", "好的"],
               ["谢谢您", "知道了，谢谢", "好的好的", "行，谢谢大夫"]),
    "closing": (["不客气，祝宝宝早日康复", "你好", "还有其他问题吗？", "好的"],
                ["不用谢", "您好", "还有别的问题吗？", "祝孩子早日康复"]),
    "report_ending": (["，请问怎么办？", "，需要吃药吗？", "，是什么原因？", "。"],
                      ["，该怎么处理？", "，严重吗？"]),
}
SLOT = re.compile(r"\{(\w+)\}")


class Turn:
    """One sentence being built: text plus the entity spans it mentions."""

    def __init__(self, speaker, act):
        self.speaker, self.act, self.text, self.spans = speaker, act, "", []

    def add(self, text, entity=None, norm=None, status=None):
        if entity:
            self.spans.append((len(self.text), len(text), entity, norm, status))
        self.text += text
        return self

    def fill(self, template, symptom=None, **words):
        """Appends ``template``: ``{s}``/``{s0}``/``{s1}`` become ``symptom`` (surface, norm,
        status) with its status, "0" or "1"; another ``{name}`` becomes ``words[name]``, a
        text or a (text, entity) pair."""
        pos = 0
        for m in SLOT.finditer(template):
            self.add(template[pos:m.start()])
            name = m.group(1)
            if name in ("s", "s0", "s1"):
                surf, norm, status = symptom
                self.add(surf, "Symptom", norm, {"s": status, "s0": "0", "s1": "1"}[name])
            elif isinstance(words[name], tuple):
                self.add(*words[name])
            else:
                self.add(words[name])
            pos = m.end()
        return self.add(template[pos:])


class Phrasing:
    """Draws a dialogue's phrasings: a training dialogue's from the seen ones, a held-out
    dialogue's (dev, test) from the held-out ones with probability :data:`HELD_OUT_RATE`."""

    def __init__(self, rng, held_out):
        self.rng, self.held_out = rng, held_out

    def __call__(self, *pools):
        """One phrasing of the union of ``pools``."""
        held = self.held_out and self.rng.random() < HELD_OUT_RATE
        return self.rng.choice([p for pool in pools for p in PHRASES[pool][held]])


def stronger(a, b):
    """The symptom status that wins when a norm repeats in a sentence: 1 > 0 > 2."""
    if a is None:
        return b
    return min(a, b, key="102".index)


def draw_age(rng, disease):
    """(pool, number): an age as a pool of :data:`PHRASES` and the number it holds."""
    if disease == "新生儿黄疸":
        return "age_days", rng.randint(3, 28)
    return rng.choice([("age_months", rng.randint(2, 11)), ("age_years", rng.randint(1, 6)),
                       ("age_years_half", rng.randint(1, 5))])


def symptom_turns(rng, phrase, norm, status, dur):
    """A doctor's question and the parent's answer about one symptom."""
    sx = (rng.choice(SURFACE[norm]), norm, status)
    q = Turn("医生", "Request-Symptom").fill(phrase("ask_symptom"), sx)
    if status == "1":
        template = phrase("present")
    elif status == "0":
        template = phrase("absent", *(("absent_verb",) if norm in VERB_NORMS else ()))
    else:
        template = phrase("uncertain")
    return [q, Turn("患者", "Inform-Symptom").fill(template, sx, d=dur)]


def dialogue_for(rng, disease, held_out=False):
    """One dialogue record in the IMCS-V2 schema, without its example_id; ``held_out``: a
    dev or test dialogue (held-out phrasings, see the module docstring)."""
    phrase = Phrasing(rng, held_out)
    prof = DISEASES[disease]
    present = rng.sample(prof["main"], rng.randint(1, len(prof["main"])))
    present += rng.sample(prof["more"], rng.randint(0, 2))
    others = sorted({s for d in DISEASES.values() for s in d["main"] + d["more"]} - set(present))
    absent = rng.sample(others, rng.randint(1, 3))
    uncertain = rng.sample(sorted(set(others) - set(absent)), rng.randint(0, 1))
    status = {**{s: "1" for s in present}, **{s: "0" for s in absent}, **{s: "2" for s in uncertain}}
    dur = phrase("duration")
    age_pool, age_n = draw_age(rng, disease)
    age = PHRASES[age_pool][0][0].format(n=age_n)   # the self-report's plain form

    first = present[0]
    report_sx = rng.choice(SURFACE[first])
    self_report = f"宝宝{age}，{report_sx}{dur}了"
    explicit = [first]
    if len(present) > 1 and rng.random() < 0.6:
        self_report += f"，还有点{rng.choice(SURFACE[present[1]])}"
        explicit.append(present[1])
    self_report += phrase("report_ending")

    def present_symptom():
        norm = rng.choice(present)
        return rng.choice(SURFACE[norm]), norm, "1"

    turns = []
    if rng.random() < 0.5:
        turns.append(Turn("医生", "Other").fill(phrase("greeting")))
    turns.append(Turn("医生", "Request-Basic_Information").fill(phrase("ask_age")))
    turns.append(Turn("患者", "Inform-Basic_Information").fill(phrase(age_pool), n=str(age_n)))
    asked = present[1:] + absent + uncertain
    rng.shuffle(asked)
    for norm in asked[:5]:
        turns += symptom_turns(rng, phrase, norm, status[norm], dur)
    if rng.random() < 0.5 and present:
        turns.append(Turn("患者", "Inform-Symptom").fill(phrase("also"), present_symptom()))
    if rng.random() < 0.7:
        exam = (rng.choice(prof["exam"]), "Medical_Examination")
        turns.append(Turn("医生", "Request-Existing_Examination_and_Treatment")
                     .fill(phrase("ask_exam"), exam=exam))
        ans = Turn("患者", "Inform-Existing_Examination_and_Treatment")
        if rng.random() < 0.5:
            ans.fill(phrase("exam_done"), exam=exam)
        else:
            ans.fill(phrase("exam_not_done"), drug=(rng.choice(prof["drug"]), "Drug"))
        turns.append(ans)
    if rng.random() < 0.6:
        turns.append(Turn("患者", "Request-Etiology").fill(phrase("ask_cause")))
        t = Turn("医生", "Inform-Etiology")
        if rng.random() < 0.4:
            t.fill(phrase("cause_symptom"), present_symptom(), cause=prof["cause"])
        else:
            t.fill(phrase("cause"), cause=prof["cause"])
        turns.append(t)
    turns.append(Turn("医生", "Diagnose").fill(phrase("diagnose"), disease=disease,
                                              vague=prof["vague"]))
    if rng.random() < 0.7:
        turns.append(Turn("患者", "Request-Drug_Recommendation").fill(phrase("ask_drug")))
        turns.append(Turn("医生", "Inform-Drug_Recommendation")
                     .fill(phrase("drug"), drug=(rng.choice(prof["drug"]), "Drug")))
    if rng.random() < 0.5:
        turns.append(Turn("患者", "Request-Medical_Advice").fill(phrase("ask_advice")))
        turns.append(Turn("医生", "Inform-Medical_Advice").fill(
            phrase("advice"), exam=(rng.choice(prof["exam"]), "Medical_Examination")))
    if rng.random() < 0.6:
        turns.append(Turn("患者", "Request-Precautions").fill(phrase("ask_precautions")))
        turns.append(Turn("医生", "Inform-Precautions").fill(phrase("precautions")))
    turns.append(Turn("患者", "Other").fill(phrase("thanks")))
    if rng.random() < 0.5:
        turns.append(Turn("医生", "Other").fill(phrase("closing")))

    dialogue, implicit = [], {}
    for i, t in enumerate(turns, start=1):
        tags = ["O"] * len(t.text)
        norms, types, local = [], [], {}
        for start, length, entity, norm, st in t.spans:
            tags[start] = f"B-{entity}"
            for j in range(start + 1, start + length):
                tags[j] = f"I-{entity}"
            if entity == "Symptom":
                norms.append(norm)
                types.append(st)
                local[norm] = stronger(local.get(norm), st)
                implicit.setdefault(norm, status.get(norm, st))
        dialogue.append({"sentence_id": str(i), "speaker": t.speaker, "sentence": t.text,
                         "dialogue_act": t.act, "BIO_label": " ".join(tags),
                         "symptom_norm": norms, "symptom_type": types,
                         "local_implicit_info": local})
    sx = "，".join(rng.choice(SURFACE[s]) for s in present)
    report = {"主诉": f"{sx}{dur}", "现病史": f"患儿{dur}前出现{sx}", "辅助检查": "暂缺",
              "既往史": "不详", "诊断": disease, "建议": phrase("precautions")}
    return {"diagnosis": disease, "self_report": self_report, "dialogue": dialogue,
            "report": [report, dict(report, 建议=phrase("precautions"))],
            "explicit_info": {"Symptom": explicit}, "implicit_info": {"Symptom": implicit}}


def generate(seed=SEED):
    """Returns {split: {example_id: record}}."""
    rng = random.Random(seed)
    splits = {name: {} for name in PER_DISEASE}
    next_id = 10000001
    for disease in DISEASES:
        for split, count in PER_DISEASE.items():
            for _ in range(count):
                splits[split][str(next_id)] = dialogue_for(rng, disease, split in HELD_OUT)
                next_id += 1
    for split in splits:  # interleave diseases, as a real export would be
        items = list(splits[split].items())
        rng.shuffle(items)
        splits[split] = dict(items)
    return splits


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vectors", action="store_true",
                        help="also retrain w2v_sample.txt on the generated public sample")
    args = parser.parse_args()
    for split, records in generate().items():
        path = os.path.join(OUT_DIR, f"IMCS-V2_{split}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(records, f, ensure_ascii=False, indent=1)
        print(f"wrote {path}: {len(records)} dialogues")
    if args.vectors:
        import sys
        sys.path.insert(0, os.path.join(HERE, "..", ".."))
        from tffre.text.word2vec import train_word2vec_on_files
        out = os.path.join(OUT_DIR, "w2v_sample.txt")
        files = [os.path.join(OUT_DIR, f"IMCS-V2_{s}.json") for s in PER_DISEASE]
        train_word2vec_on_files(files, out, vector_size=64, seed=0)
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
