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
"""

import argparse
import json
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
# The sample ships as package data, so that a non-editable install finds it.
OUT_DIR = os.path.join(HERE, "..", "..", "tffre", "resources", "imcs_sample")
SEED = 20241017
PER_DISEASE = {"train": 32, "dev": 6, "test": 10}

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

DURATIONS = ["一天", "两天", "三天", "四五天", "一周", "半个月"]
PRECAUTIONS = ["注意多喝水，饮食清淡", "注意保暖，不要着凉", "少吃多餐，不要吃油腻的",
               "保持室内空气流通", "注意观察体温变化", "多晒太阳，按时喂奶"]
OTHER_PATIENT = ["好的，谢谢医生", "明白了", "嗯嗯", "好的"]
OTHER_DOCTOR = ["不客气，祝宝宝早日康复", "你好", "还有其他问题吗？", "好的"]


class Turn:
    """One sentence being built: text plus the entity spans it mentions."""

    def __init__(self, speaker, act):
        self.speaker, self.act, self.text, self.spans = speaker, act, "", []

    def add(self, text, entity=None, norm=None, status=None):
        if entity:
            self.spans.append((len(self.text), len(text), entity, norm, status))
        self.text += text
        return self


def stronger(a, b):
    """The symptom status that wins when a norm repeats in a sentence: 1 > 0 > 2."""
    if a is None:
        return b
    return min(a, b, key="102".index)


def age_text(rng, disease):
    if disease == "新生儿黄疸":
        return f"出生{rng.randint(3, 28)}天"
    return rng.choice([f"{rng.randint(2, 11)}个月", f"{rng.randint(1, 6)}岁", f"{rng.randint(1, 5)}岁半"])


def symptom_turns(rng, norm, status, dur):
    """A doctor's question and the parent's answer about one symptom."""
    surf = rng.choice(SURFACE[norm])
    q = Turn("医生", "Request-Symptom")
    form = rng.randrange(3)
    if form == 0:
        q.add("宝宝有没有").add(surf, "Symptom", norm, status).add("？")
    elif form == 1:
        q.add(surf, "Symptom", norm, status).add("吗？")
    else:
        q.add("有").add(surf, "Symptom", norm, status).add("的情况吗？")
    a = Turn("患者", "Inform-Symptom")
    if status == "1":
        form = rng.randrange(4)
        if form == 0:
            a.add("有").add(surf, "Symptom", norm, status).add(f"，{dur}了")
        elif form == 1:
            a.add("是的，").add(surf, "Symptom", norm, status).add("挺厉害的")
        elif form == 2:
            a.add("之前没有").add(surf, "Symptom", norm, "0").add("，这两天开始").add(surf, "Symptom", norm, "1").add("了")
        else:
            a.add("有点").add(surf, "Symptom", norm, status)
    elif status == "0":
        form = rng.randrange(3)
        if form == 0:
            a.add("没有").add(surf, "Symptom", norm, status)
        elif form == 1 and norm in ("咳嗽", "发热", "呕吐", "腹泻", "哭闹", "喘息"):
            a.add("不").add(surf, "Symptom", norm, status)
        else:
            a.add("没有，也没").add(surf, "Symptom", norm, status).add("过")
    else:
        form = rng.randrange(2)
        if form == 0:
            a.add("不太确定有没有").add(surf, "Symptom", norm, status)
        else:
            a.add("好像有一点").add(surf, "Symptom", norm, status).add("，说不准")
    return [q, a]


def dialogue_for(rng, disease):
    """One dialogue record in the IMCS-V2 schema, without its example_id."""
    prof = DISEASES[disease]
    present = rng.sample(prof["main"], rng.randint(1, len(prof["main"])))
    present += rng.sample(prof["more"], rng.randint(0, 2))
    others = sorted({s for d in DISEASES.values() for s in d["main"] + d["more"]} - set(present))
    absent = rng.sample(others, rng.randint(1, 3))
    uncertain = rng.sample(sorted(set(others) - set(absent)), rng.randint(0, 1))
    status = {**{s: "1" for s in present}, **{s: "0" for s in absent}, **{s: "2" for s in uncertain}}
    dur = rng.choice(DURATIONS)
    age = age_text(rng, disease)

    first = present[0]
    report_sx = rng.choice(SURFACE[first])
    self_report = f"宝宝{age}，{report_sx}{dur}了"
    explicit = [first]
    if len(present) > 1 and rng.random() < 0.6:
        self_report += f"，还有点{rng.choice(SURFACE[present[1]])}"
        explicit.append(present[1])
    self_report += rng.choice(["，请问怎么办？", "，需要吃药吗？", "，是什么原因？", "。"])

    turns = []
    if rng.random() < 0.5:
        turns.append(Turn("医生", "Other").add("你好"))
    turns.append(Turn("医生", "Request-Basic_Information").add(rng.choice(["宝宝多大了？", "孩子现在多大？"])))
    turns.append(Turn("患者", "Inform-Basic_Information").add(age))
    asked = present[1:] + absent + uncertain
    rng.shuffle(asked)
    for norm in asked[:5]:
        turns += symptom_turns(rng, norm, status[norm], dur)
    if rng.random() < 0.5 and present:
        t = Turn("患者", "Inform-Symptom").add("对了，还")
        norm = rng.choice(present)
        turns.append(t.add(rng.choice(SURFACE[norm]), "Symptom", norm, "1"))
    if rng.random() < 0.7:
        exam = rng.choice(prof["exam"])
        turns.append(Turn("医生", "Request-Existing_Examination_and_Treatment")
                     .add("做过").add(exam, "Medical_Examination").add("吗？"))
        ans = Turn("患者", "Inform-Existing_Examination_and_Treatment")
        if rng.random() < 0.5:
            ans.add("做了").add(exam, "Medical_Examination").add("，说是有点问题")
        else:
            ans.add("还没做，吃了").add(rng.choice(prof["drug"]), "Drug").add("，没什么效果")
        turns.append(ans)
    if rng.random() < 0.6:
        turns.append(Turn("患者", "Request-Etiology").add(rng.choice(["这是什么原因引起的呢？", "为什么会这样？"])))
        t = Turn("医生", "Inform-Etiology")
        if rng.random() < 0.4:
            norm = rng.choice(present)
            t.add(rng.choice(SURFACE[norm]), "Symptom", norm, "1").add("一般是")
        turns.append(t.add(prof["cause"]).add("引起的" if rng.random() < 0.5 else ""))
    if rng.random() < 0.5:
        turns.append(Turn("医生", "Diagnose").add(f"考虑是{disease}"))
    else:
        turns.append(Turn("医生", "Diagnose").add(f"从症状看，可能是{prof['vague']}"))
    if rng.random() < 0.7:
        turns.append(Turn("患者", "Request-Drug_Recommendation").add(rng.choice(["需要吃什么药吗？", "用什么药好？"])))
        turns.append(Turn("医生", "Inform-Drug_Recommendation").add("可以吃点")
                     .add(rng.choice(prof["drug"]), "Drug"))
    if rng.random() < 0.5:
        turns.append(Turn("患者", "Request-Medical_Advice").add(rng.choice(["需要去医院吗？", "要不要去医院看看？"])))
        turns.append(Turn("医生", "Inform-Medical_Advice").add("建议去医院查一下")
                     .add(rng.choice(prof["exam"]), "Medical_Examination"))
    if rng.random() < 0.6:
        turns.append(Turn("患者", "Request-Precautions").add(rng.choice(["平时需要注意什么？", "在家要注意些什么？"])))
        turns.append(Turn("医生", "Inform-Precautions").add(rng.choice(PRECAUTIONS)))
    turns.append(Turn("患者", "Other").add(rng.choice(OTHER_PATIENT)))
    if rng.random() < 0.5:
        turns.append(Turn("医生", "Other").add(rng.choice(OTHER_DOCTOR)))

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
              "既往史": "不详", "诊断": disease, "建议": rng.choice(PRECAUTIONS)}
    return {"diagnosis": disease, "self_report": self_report, "dialogue": dialogue,
            "report": [report, dict(report, 建议=rng.choice(PRECAUTIONS))],
            "explicit_info": {"Symptom": explicit}, "implicit_info": {"Symptom": implicit}}


def generate(seed=SEED):
    """Returns {split: {example_id: record}}."""
    rng = random.Random(seed)
    splits = {name: {} for name in PER_DISEASE}
    next_id = 10000001
    for disease in DISEASES:
        for split, count in PER_DISEASE.items():
            for _ in range(count):
                splits[split][str(next_id)] = dialogue_for(rng, disease)
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
