"""CLEAR-format adapter: read CLEAR records, judge answers under the graph predicate, convert to problems.

CLEAR (Chen et al. 2024, "CLEAR: Can Language Models Really Understand Causal Graphs?") ships one
JSON-Lines file per task type (``data/json_single/<task_type>.json``); a record is
``{description, graph_type, uid, sid, question, answer, question_type, task_type}``. How each field,
description and question template is read and how each question type is judged is in
(docs/clear.md, "Record format"); this module reads all twenty task types and every question type
they use:

==========================  ======================  ===============================================
task type                   question types          a valid answer is
==========================  ======================  ===============================================
backdoor_adjustment_set     FO (any/minimal/        a set satisfying the backdoor criterion
                            maximal), YN, MC, EX    (m-separation form in ADMGs)
frontdoor_adjustment_set    FO (any/minimal/        a set satisfying Pearl's front-door criterion
                            maximal), YN, MC, EX
d-separation                FO (any/minimal), YN,   a set Z, x, y not in Z, m-separating x and y
                            MC                      (d-separation in a DAG)
blocked_path                FO (any/minimal), YN,   a set Z, path endpoints not in Z, blocking the
                            MC                      path
backdoor_path               FO (shortest/longest),  a path from x to y starting with an arrowhead
                            FA, HM, YN, MC          into x (``x<-``, ``x<->``); FA/HM: all of them
directed_path               FA, HM, YN, EX, MC      a simple path ``x->...->y``
cycle                       FO, YN, MC, EX          a closed directed path (rule below)
markov_blanket              FO, YN, MC              the Markov blanket (DAGs)
c-component                 YN, FA, HM              the partition into districts (maximal sets
                                                    joined by bi-directed edges alone)
2_node_relation             FA, HM, YN, MC, EX      parents / children / ancestors / descendants
                                                    along directed edges (transitive ones exclude
                                                    the node itself)
3_node_relation             FA, HM, YN, MC, EX      unshielded chains / forks / v-structures of the
                                                    directed edges, compared as unordered triples
edge                        FA, HM, YN, MC          the description's edges (``->`` by direction,
                                                    ``<->`` and undirected ``-`` either way)
node                        FA, HM, YN, MC          the description's nodes
path                        FO (any/shortest/       a simple path of the skeleton from x to y, each
                            longest), FA, HM, YN,   step written with its edge's mark; any tied
                            MC                      shortest / longest path counts
topological                 FO, YN, MC              any order of all nodes with every directed
                                                    edge forward
maximal_root_set            FA, HM, YN, MC          the sinks (nodes without children)
markov_equivalent           FO, YN                  any other DAG with the same skeleton and
                                                    v-structures (DAGs only)
identification              YN                      whether P(y | do(x)) is identifiable under the
                                                    complete ID criterion (Tian; Shpitser-Pearl)
c-forest, c-tree            YN                      one district and at most one child per node
                                                    (C-tree: exactly one root), by definition
==========================  ======================  ===============================================

Semantics fixed by the published labels: *minimal* / *maximal* sets are valid sets with no valid
proper subset / superset, decided by brute force over subsets; *shortest* /
*longest* count edges among all backdoor paths; a cycle candidate is a cycle only when every arrow
is ``->`` (or every arrow ``<-``), each step is an edge in that direction and the last node equals
the first (``N<-W->K->N`` is not one); ``Is it a C-component?`` is yes exactly when the whole graph
is one district (directed edges do not count), whatever the ``graph_type``; FA answers compare as
sets of paths / sets of sets; backdoor paths in ADMGs may use ``<->`` edges.

Labels and wording cues are never read: the capitalisation of ``Markov Equivalent Class`` and the
``graph_type`` field (which decide some published labels) do not change a verdict; where a
published label contradicts the stated definition the judge follows the definition (docs/clear.md
lists those records).

Where the wording leaves a case open the judge answers ``None`` instead of guessing:
front-door questions when the treatment has no directed path to the outcome (the empty set then
satisfies the criterion literally), Markov blankets and Markov equivalence outside DAGs,
identification in a graph with a directed cycle, separation claims whose conditioning set holds an
endpoint, claimed paths written from the end back to the start, claimed closed walks that revisit
a node, and enumerations over the caps.

Public API: :func:`read_question` (a typed :class:`ClearQuestion`), :func:`judge`,
:func:`listed_answers`, :func:`to_problem` (records whose question is a query kind's, as causal
problems that CALVER scores), :func:`load_records`, :func:`evaluate_file`, :func:`format_summary`,
:func:`judge_report`, :func:`format_report` (``faithgrpo clear-judge``), :func:`parse_description`.
Every parser is bounded (length caps before any regex), nothing is evaluated, and :func:`judge`
never raises.
"""

from faithgrpo.tasks.clear.candidates import judge, listed_answers
from faithgrpo.tasks.clear.descriptions import (
    QUESTION_TYPES,
    TASK_TYPES,
    VARIANTS,
    normalize_task_type,
    parse_description,
)
from faithgrpo.tasks.clear.questions import read_question
from faithgrpo.tasks.clear.records import (
    evaluate_file,
    format_report,
    format_summary,
    judge_report,
    load_records,
    to_problem,
)
from faithgrpo.tasks.clear.values import ClearQuestion

__all__ = [
    "QUESTION_TYPES",
    "TASK_TYPES",
    "VARIANTS",
    "ClearQuestion",
    "evaluate_file",
    "format_report",
    "format_summary",
    "judge",
    "judge_report",
    "listed_answers",
    "load_records",
    "normalize_task_type",
    "parse_description",
    "read_question",
    "to_problem",
]
