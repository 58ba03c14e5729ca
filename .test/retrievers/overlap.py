"""A user's Python retriever with a prepare step, for the .test/ run (its
prepare stage): the sessions ranked by how many of the question's words they
hold, ties in haystack order."""


def prepare(texts):
    return [sorted(set(t.lower().split())) for t in texts]


def rank(question, haystack, prepared):
    words = set(question.text.lower().split())
    return sorted(range(len(haystack)), key=lambda i: -len(words & set(prepared[i])))
