"""The project's own Chinese functional regression set (the zh family).

This is a *functional test*, not a benchmark: eleven queries over ten tiny
sessions, built so that the outcome is known in advance.  It checks that the
zh pipeline (docs/harnesses.md#the-zh-set and docs/harnesses.md#zhcjs: S-ZH event tokens, sentence-piece
pseudo-events, variant A with the ASCII-only window W-CF and variant B with
the 0.7.0 window W-070 that adds Han runs) behaves as designed: A cannot see
a purely Chinese query at all (0/11), B finds the gold session at rank 1 for
the ten queries that share a Han run with it (10/11), and the ceiling control
misses under both.

The original harness (``zh.cjs``) embedded its own data, which this project
does not have.  The texts below were written from scratch for this project;
they only follow the *structure* described in docs/harnesses.md#the-zh-set:

* ``SESSIONS``: ten sessions ``s1``..``s10``, each one string of the form
  "用户：…… 助手：……" (full-width colons and sentence punctuation) about a
  design decision of the Memo plugin: visual theme, naming conventions,
  release channel, benchmark trustworthiness, team space, where notes are
  stored, why Chinese retrieval is weak, the stop-word pitfall, time
  filtering, and why there is no vector search.  Several embed ASCII words.
* ``QUERIES``: eleven (query, gold id) pairs.  The first ten target
  ``s1``..``s10`` in order; each begins with a clause copied verbatim, as one
  maximal Han run, from its gold session (from the user's question, except
  the fifth, whose clause comes from the assistant's reply), followed by
  Chinese punctuation and a different follow-up clause, so the gold session
  contains that Han run but never the whole query.  The eleventh is a ceiling
  control that targets ``s7`` but none of whose Han runs occurs in any
  session.  No query contains ASCII letters or digits, so the W-CF window is
  always empty.
* :func:`pieces`: the pseudo-events of a session (the text split at the
  full-width 。！？).

``tests/unit/datasets/test_zh_data.py`` checks all of these properties and the published
outcome (A 0/11, B 10/11) through the engine.
"""

from __future__ import annotations

import re

__all__ = ["SESSIONS", "QUERIES", "pieces"]

SESSIONS: list[tuple[str, str]] = [
    (
        "s1",
        "用户：插件界面打算用什么配色风格？设计稿里有好几套方案，我有点拿不定主意。"
        " 助手：最后定下来的是 Nord 主题，冷色调，以蓝灰为主。"
        "深色模式和浅色模式共用同一套色板，只调整明度。"
        "图标统一用线性风格，不加阴影，也不做渐变，这样在终端和网页里看起来都比较干净。",
    ),
    (
        "s2",
        "用户：我们的包名和工具名有什么命名规矩？发布到 npm 之前想先确认一下。"
        " 助手：所有包都以 memo- 作为前缀，例如 memo-core 和 memo-cli，这样在 npm 上一搜就能找全。"
        "提供给模型调用的工具名统一放在 memo 命名空间下，写成 memo_search、memo_save 这种 snake_case 形式。"
        "不要混用驼峰写法，否则有些客户端会识别失败。",
    ),
    (
        "s3",
        "用户：新版本通过什么渠道发布？大家应该去哪里下载？"
        " 助手：正式版只在 GitHub 上发 release，每次先打 tag，再由持续集成自动构建并上传到 npm。"
        "我们不走应用商店，也不提供独立的安装包。"
        "预览版挂在 next 标签下，想尝鲜的人可以手动安装。",
    ),
    (
        "s4",
        "用户：那些基准测试的分数到底可不可信？会不会是专门调出来的？"
        " 助手：benchmark 的数字只能说明在特定数据集上的表现，不能代表所有场景。"
        "我们把评测脚本和原始结果都公开了，任何人都能自己跑一遍。"
        "调参时只用开发集，最终分数在测试集上跑一次就报告，不会反复挑最好看的那次。",
    ),
    (
        "s5",
        "用户：能不能让几个人共用同一份记忆？比如整个小组一起查资料。"
        " 助手：团队空间这个功能暂时不会上线，主要是因为权限管理和冲突合并都很复杂。"
        "如果确实需要，可以把各自导出的 JSON 文件放进同一个仓库，再分别导入。"
        "等单人版本足够稳定以后，我们会重新评估。",
    ),
    (
        "s6",
        "用户：笔记具体保存在电脑的哪个位置？我想定期备份一下。"
        " 助手：所有笔记都写在 $DSH_HOME/memo/notes.jsonl 里，每行一条 JSON 记录。"
        "没有设置这个环境变量时，默认放在用户主目录下。"
        "备份的话直接复制这个文件就行，它是纯文本，也方便用 git 管理版本。",
    ),
    (
        "s7",
        "用户：为什么用中文搜索的时候经常什么都找不到？"
        " 助手：因为全文索引用的是 SQLite 自带的 unicode61 分词器，它把一整串连续的汉字当成一个 token。"
        "一句话里只要没有空格和标点，整句就是一个词，只有查询和原文一字不差才会命中。"
        "英文单词之间本来就有空格，所以不会遇到这个问题。",
    ),
    (
        "s8",
        "用户：停用词表是不是越长越好？我想把常见的虚词都加进去。"
        " 助手：不是。停用词表太长反而会出问题，像 what、when 这类词被去掉以后，"
        "问题里剩下的关键词可能不足两个，加权那一步就根本不会执行。"
        "中文这边也一样，如果把的、了、是这样的字都删掉，原本连在一起的词会被拆散，反而匹配不上。",
    ),
    (
        "s9",
        "用户：按时间筛选记录时是直接排除旧的还是只降低排名？"
        " 助手：两种都支持。硬过滤会把指定日期之前的记录完全排除，适合明确问“上周说过什么”的场景。"
        "软过滤只是给较新的记录加分，旧记录仍然可能出现在结果里。"
        "默认用软过滤，因为用户说的时间经常并不准确。",
    ),
    (
        "s10",
        "用户：为什么不加向量检索？现在很多工具都用嵌入模型。"
        " 助手：主要是为了保持零依赖、完全离线。向量检索需要下载模型，安装包会变大很多，启动也更慢。"
        "而且我们的 benchmark 显示，关键词加上短语匹配在大多数问题上已经够用。"
        "以后就算支持，也只会做成可选插件，不会默认开启。",
    ),
]

QUERIES: list[tuple[str, str]] = [
    ("插件界面打算用什么配色风格？暗色背景下文字会不会看不清", "s1"),
    ("我们的包名和工具名有什么命名规矩？以后新增的插件也要照着做吗", "s2"),
    ("新版本通过什么渠道发布？预览版和正式版之间怎么区分", "s3"),
    ("那些基准测试的分数到底可不可信？有没有人独立验证过这些结果", "s4"),
    # The fifth query's clause comes from the assistant's reply.
    ("团队空间这个功能暂时不会上线？那小组之间想共享笔记该怎么办", "s5"),
    ("笔记具体保存在电脑的哪个位置？换一台机器以后还能找回来吗", "s6"),
    ("为什么用中文搜索的时候经常什么都找不到？换成别的分词器会不会好一些", "s7"),
    ("停用词表是不是越长越好？去掉太多虚词会带来哪些副作用", "s8"),
    ("按时间筛选记录时是直接排除旧的还是只降低排名？默认采用的是哪一种", "s9"),
    ("为什么不加向量检索？将来会不会作为可选功能提供", "s10"),
    # Ceiling control: none of its Han runs occurs in any session.
    ("汉语查询命中率偏低的根源在哪里？有没有改进办法", "s7"),
]

_SENTENCE_END = re.compile("[。！？]")


def pieces(text: str) -> list[str]:
    """The pseudo-events of a session: ``text`` split at the full-width 。！？.

    Each piece is kept *trimmed* (leading and trailing whitespace removed), and
    pieces that are blank after trimming are dropped (docs/harnesses.md#the-zh-set).
    Python's ``str.strip()`` and JS ``trim()`` differ only on exotic
    characters (U+001C..U+001F, U+FEFF) that this data does not contain.
    """
    out = []
    for piece in _SENTENCE_END.split(text):
        piece = piece.strip()
        if piece:
            out.append(piece)
    return out
