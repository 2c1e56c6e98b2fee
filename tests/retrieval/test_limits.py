from searchplay.config import ServeConfig
from searchplay.retrieval.limits import RequestLimits, refusal


def test_the_defaults_are_the_configs():
    assert RequestLimits.from_serve_config(ServeConfig()) == RequestLimits()


def test_requests_within_the_bounds_pass():
    limits = RequestLimits(max_queries=2, max_query_chars=5, max_top_k=3)
    assert refusal(["abcde", ""], 3, limits) is None


def test_each_bound_is_named_in_its_refusal():
    limits = RequestLimits(max_queries=2, max_query_chars=5, max_top_k=3)
    assert refusal([], 1, limits)[0] == 422
    assert refusal(["a", "b", "c"], 1, limits) == (
        413, "3 queries in one request, at most 2 (serve.max_queries): split the batch into several requests")
    assert refusal(["a", "abcdef"], 1, limits) == (
        413, "query 1 has 6 characters, at most 5 (serve.max_query_chars): shorten it")
    assert refusal(["a"], 4, limits) == (422, "topk 4 is above the limit of 3 (serve.max_top_k): ask for fewer")
