"""The paper's prompts (Appendix A.2): feature labeling (x2), feature discovery, LLM judge."""

from __future__ import annotations

import json

SENTIMENT_TASK = """Analyze the following user messages from a coding assistant session:

{combined_messages}

Please provide the following analysis:
1. One sentence describing what the user is trying to accomplish
2. Classify the overall sentiment of the user's messages into one of these categories: [Positive, Negative, Neutral] and explain why
3. Classify the type of task into exactly one of these categories (choose only one that best fits): [Fix Bugs, Implement Features, Create Programs from Scratch, Fix Failing Continuous Integration, Fix Merge Conflicts, Write Documentation, Perform Deployments, Perform Data Analysis]
4. Classify the development cluster into up to two of these categories (choose only the ones that are the best fits):
- Write code from scratch
- Fix python issues
- Fix underspecified issues
- Fix Java issues
- Testing code
- Web browsing and research
- Administrative tasks
- Fix continuous integration issues
- None of the above
5. Provide 1-2 brief example messages from the conversation that support your sentiment classification (truncate if too long)

Format your response as JSON with these fields:
{{
"task_description": "one sentence",
"sentiment": {{
"classification": "Positive/Negative/Neutral",
"explanation": "brief explanation",
"example_messages": ["message 1", "message 2"]
}},
"task_type": "one of the categories",
"development_cluster": ["cluster 1", "cluster 2" (if applicable)]
}}"""  # noqa: E501

FAILURE_MODES = """Analyze the following user messages from a coding assistant session:

{combined_messages}

For each issue item below, answer YES or NO based on whether there is evidence in the user messages that this issue occurred. Provide a brief explanation for each:

[item 1] misunderstood_intention: Agent misunderstood the user's goal/intent.
- Examples: User asked for a summary and agent produced a rewrite; user wanted high-level bullets but agent delivered full code.
[item 2] did_not_follow_instruction: Agent ignored or failed to comply with explicit instructions/system constraints.
- Examples: User: "Do NOT push to main." Agent pushes to main; System says not to create pull request unless user asks for it and user didn't ask for it, agent creates pull request; user asked for bullet points only, agent gives long prose.
[item 3] insufficient_analysis: Didn't explore existing materials sufficiently (prior code/docs/examples) before acting.
- Examples: User points to an existing function/file that is relevant OR already solves it; agent reinvents it.
[item 4] insufficient_testing: Skipped reasonable verification/tests for non-trivial or risky changes (note: trivial edits may be acceptable).
- Examples: No run/validation for a new parser; no check that a migration applies cleanly; no sanity check of output.
[item 5] insufficient_debugging: Did not investigate or reduce failing behavior when needed to make progress.
- Examples: Ignores stack trace; no isolation of failure; proceeds while errors persist.
[item 6] incomplete_implementation: Delivered unfinished or non-functioning work.
- Examples: TODO/FIXME left; stub methods; code that cannot run.
[item 7] scope_creep: Implemented unrequested features without approval.
- Examples: Adds a dashboard or endpoint not asked for.

Format your response as JSON with these fields:
{{
"misunderstood_intention": {{"answer": "YES/NO", "explanation": "brief explanation"}},
"did_not_follow_instruction": {{"answer": "YES/NO", "explanation": "..."}},
"insufficient_analysis": {{"answer": "YES/NO", "explanation": "..."}},
"insufficient_testing": {{"answer": "YES/NO", "explanation": "..."}},
"insufficient_debugging": {{"answer": "YES/NO", "explanation": "..."}},
"incomplete_implementation": {{"answer": "YES/NO", "explanation": "..."}},
"scope_creep": {{"answer": "YES/NO", "explanation": "..."}}
}}"""  # noqa: E501

DISCOVERY = """You are an expert product analyst. Using the following conversation ONLY as an example of the kinds of signals available (user/agent messages, visible errors, git actions, etc.), propose 10 general, reusable features that would predict user satisfaction or dissatisfaction across coding-assistant conversations.

Do NOT evaluate this particular conversation. Define features that apply broadly. Each feature should be clearly computable from typical traces like this one.

EXAMPLE CONVERSATION CONTEXT (for reference only)
---
{conversation}
---

Return ONLY valid JSON with this schema:
{{
"features": [
{{
"name": "short, canonical feature name",
"definition": "what the feature measures in general terms",
"why_predictive": "why the feature correlates with satisfaction/dissatisfaction",
"how_to_compute": "signals/heuristics to extract it from conversation logs",
"value_type": "one of: binary | ordinal | count | ratio | continuous",
"polarity": "satisfaction | dissatisfaction | mixed",
"example_indicators": ["short, concrete examples of signals"]
}}
],
"overall_guidance": "one sentence on how to use this feature set"
}}

Constraints:
- Provide exactly 10 features
- Do not include per-conversation judgments or values
- Keep definitions concise and implementation-oriented
- Respond with JSON only (no prose outside JSON)"""  # noqa: E501

JUDGE = """Please analyze the following conversation between a user and an AI coding assistant to determine user satisfaction.

CONVERSATION:
{conversation}

Please provide your analysis in the following JSON format:
{{
"binary_satisfied": true/false,
"likert_score": 1-5,
"explanation": "detailed explanation of your reasoning"
}}

EVALUATION CRITERIA:
- Binary satisfaction: Was the user satisfied with the agent's help by the end of the conversation? (true/false)
- Likert scale (1-5): 1=Very Dissatisfied, 2=Dissatisfied, 3=Neutral, 4=Satisfied, 5=Very Satisfied
- Consider factors like:
- Whether the user's problem was solved
- Quality of the agent's responses
- User's tone and feedback throughout the conversation
- Whether the user expressed gratitude or frustration
- If the conversation ended on a positive or negative note

Respond ONLY with the JSON format above, no additional text."""  # noqa: E501


def user_messages(transcript: str | list[dict]) -> list[str]:
    """The user turns of a transcript (JSON string or list of ``{role, text}``)."""
    turns = json.loads(transcript) if isinstance(transcript, str) else transcript
    return [str(t.get("text", "")) for t in turns if t.get("role") == "user"]


def combine_user_messages(transcript: str | list[dict], max_chars: int = 400_000) -> str:
    """Format the user messages as the labeling prompts' ``{combined_messages}``."""
    msgs = user_messages(transcript)
    text = "\n\n".join(f"User message {i + 1}: {m}" for i, m in enumerate(msgs))
    return truncate_middle(text or "(no user messages)", max_chars)


def format_conversation(transcript: str | list[dict]) -> str:
    """Format a transcript as ``User: ...`` / ``Agent: ...`` lines."""
    turns = json.loads(transcript) if isinstance(transcript, str) else transcript
    return "\n\n".join(f"{'User' if t.get('role') == 'user' else 'Agent'}: {t.get('text', '')}"
                       for t in turns)


def truncate_middle(text: str, max_chars: int) -> str:
    """Cut ``text`` to ``max_chars`` keeping its start and end, marking the cut."""
    if len(text) <= max_chars:
        return text
    marker = "\n\n[... {n} characters omitted ...]\n\n"
    keep = max(max_chars - len(marker.format(n=len(text))), 2)
    head, tail = keep // 2, keep - keep // 2
    return text[:head] + marker.format(n=len(text) - head - tail) + text[len(text) - tail:]


def fit_conversation(transcript: str | list[dict], template: str, max_input_tokens: int) -> str:
    """Render ``template`` with the conversation cut to fit ``max_input_tokens``."""
    conversation = format_conversation(transcript)
    budget_chars = max(4 * max_input_tokens - len(template), 400)
    return template.format(conversation=truncate_middle(conversation, budget_chars))


def messages(prompt: str) -> list[dict]:
    """One-user-turn chat messages for ``prompt``."""
    return [{"role": "user", "content": prompt}]
