"""Every kind of audit record, in one enum: the audit log is the contract that `report`, the console and tests read.

A kind names what was recorded (a turn started, a fault, a refused control), never a device event, so the kernel can
use this enum without naming one. `AuditKind` is a `StrEnum`: a member *is* its dotted string, so the JSON line, the
readers (`metrics/turns.py`, `web/tap.py`) and `MemoryAudit.of("turn.started")` see exactly the value they always did.
Each member carries one line saying what the record holds (`AuditKind.TURN_STARTED.description`).
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["AuditKind"]


class AuditKind(StrEnum):
    """The kind of one audit record; the value is the stable dotted name written to the log."""

    description: str

    def __new__(cls, value: str, description: str) -> "AuditKind":
        member = str.__new__(cls, value)
        member._value_ = value
        member.description = description
        return member

    # --- the event kernel (events/) ---
    EVENT_DETECTED = "event.detected", "an event request the kernel accepted for the turn (name, source, arguments)"
    EVENT_DROPPED = "event.dropped", "an event request the kernel refused before running it (duplicate, unknown...)"
    EVENT_RESOLUTION = "event.resolution", "how an event's arguments were resolved (deterministic path, missing)"
    EVENT_FALLBACK = "event.fallback", "the argument fallback (EventAgent) was asked; whether it answered"
    EVENT_ATTEMPT_FAILED = "event.attempt_failed", "one attempt of an event handler failed (retried if transient)"
    EVENT_IDEMPOTENT_REPLAY = "event.idempotent_replay", "an event already done under the same key: result replayed"
    EVENT_RESULT = "event.result", "an event's final result: status, timings, output or error"
    EVENT_REFUSED = "event.refused", ("an event the model proposed that the child's words do not ask for (an unasked "
                                      "goodbye or mute): refused, never run")
    EVENT_IGNORED = "event.ignored", ("an event the chat agent proposed where none may run (a follow-up round, or an "
                                      "example of the prompt read back)")
    BATCH_COMPLETED = "batch.completed", "a turn's events all finished: their names and the batch's timings"
    BATCH_ABORTED = "batch.aborted", "a turn's event batch was cancelled before it finished"

    # --- the turn (session/turn.py, session/gate.py) ---
    TURN_STARTED = "turn.started", "a turn began: its id, the host event and its type, the utterance"
    TURN_COMPLETED = "turn.completed", "a turn ended: its latency milestones, token counts and whether terminated"
    TURN_FOLLOW_UP = "turn.follow_up", "the follow-up call that words event results (search payloads included)"
    TURN_HOLDING_CUE = "turn.holding_cue", "the holding cue spoken while a slow turn was still working"
    TURN_NOT_RUN = "turn.not_run", "events the agent named that did not run (so nothing promised them)"
    SPEECH_HIDDEN = "speech.hidden", "a sentence held back from the speaker (markup, a false promise...)"
    GATE_USED = "gate.used", "the offline gate answered without the LLM: the definitions it matched, and after what"
    CONFIRMATION_ASKED = ("confirmation.asked", "an event that needs the child's yes was held: its id, name, "
                          "arguments and the question asked")
    CONFIRMATION_CONFIRMED = ("confirmation.confirmed", "the child said yes in the next turn: the held event runs "
                              "with the arguments asked about")
    CONFIRMATION_CANCELLED = ("confirmation.cancelled", "a held event was dropped unrun, and why (declined, "
                              "new_topic, expired, session_ended)")

    # --- the chat agent's stream (agent/chat_agent.py) ---
    CHAT_EVENT_BLOCK = "chat.event_block", "an event block parsed out of the chat text stream (never spoken)"
    CHAT_UNCLOSED_EVENT_BLOCK = "chat.unclosed_event_block", "an event block the stream opened but never closed"
    CHAT_INCOMPLETE_TOOL_CALL = "chat.incomplete_tool_call", "a tool call cut off by a fault mid-stream (not run)"
    CHAT_TEXT_TOOL_CALL_RECOVERED = ("chat.text_tool_call_recovered",
                                     "a tool call the model wrote as text, recovered and run")
    CHAT_TEXT_TOOL_CALL_HIDDEN = "chat.text_tool_call_hidden", "a tool call written as text, hidden and not run"
    CHAT_PARTIAL_SENTENCE_DROPPED = ("chat.partial_sentence_dropped",
                                     "an unfinished sentence at the end of an aborted stream, not spoken")
    CHAT_TEXT_HIDDEN = "chat.text_hidden", "text the speakable filter hid (JSON, code, instructions) and why"
    CHAT_UNBACKED_PROMISE = ("chat.unbacked_promise",
                             "a spoken claim of an action (\"I've set...\", \"Bye!\") with no such event run in the turn")
    CHAT_MARKUP_STRIPPED = "chat.markup_stripped", "counts of markup stripped from a turn's spoken text"

    # --- the LLM client ---
    LLM_FAULT = "llm.fault", "an LLM call failed: which call, the fault code and message"
    LLM_USAGE_MISSING = "llm.usage_missing", "an LLM response that reported no token usage"
    LLM_SPECULATION = "llm.speculation", ("a request sent during the end-of-turn wait: started (the text so far), "
                                          "adopted by its turn, or cancelled (why): never read, spoken or run")

    # --- the voice loop (session/voice_loop.py) ---
    VOICE_STATE = "voice.state", "the voice session changed state (idle, listening, thinking, speaking)"
    VOICE_SESSION_OPENED = "voice.session_opened", "a conversation session opened (wake or first speech)"
    VOICE_SESSION_CLOSED = "voice.session_closed", "a conversation session closed, and why (idle, asked...)"
    VOICE_TURN = "voice.turn", "one spoken turn's timeline, transcript and reply (a metrics.VoiceTurnRecord)"
    VOICE_TURN_FAILED = "voice.turn_failed", "a spoken turn raised; the loop went on listening"
    VOICE_BARGE_IN = "voice.barge_in", "the child spoke over the toy and the reply was cut"
    VOICE_WENT_ON = "voice.went_on", ("the child went on with her sentence before she could have heard the answer: "
                                      "it stopped, unremembered, and her words are answered together")
    VOICE_BARGE_IN_IGNORED = "voice.barge_in_ignored", ("speech during an answer that sounded like the toy's own "
                                                        "voice leaking past the echo canceller: not a barge-in")
    VOICE_OWN_VOICE_DROPPED = "voice.own_voice_dropped", ("what the listener heard of speech judged the toy's own "
                                                          "voice: not taken for the child's words")
    VOICE_WAKE_WORD = "voice.wake_word", "the wake word was heard: which, and how long after the phrase ended"
    VOICE_INBOX_FULL = "voice.inbox_full", "the voice loop's inbox was full and a message was dropped"
    VOICE_SOURCE_FAILED = "voice.source_failed", "the audio source feeding the voice loop failed"

    # --- the audit log itself ---
    AUDIT_GAP = "audit.gap", ("records the audit could not keep while its disk refused writes: how many were lost "
                              "and the time of the oldest record kept after them")

    # --- the voice application (start-up, devices) ---
    RUNTIME_READY = "runtime.ready", "the voice application is listening: start-up time and its mode"
    RUNTIME_WARM = "runtime.warm", "every model warmed up: time since start and the start-up marks"
    RUNTIME_FAILED = "runtime.failed", "the voice application stopped on a failure, and the reason"
    AUDIO_DEVICE = "audio.device", "an audio device was lost, recovered or replaced (role, event, message)"
    TTS_WAITED_FOR_VOICE = "tts.waited_for_voice", "a reply waited this many ms for the voice model to load"

    # --- turns from outside the child's voice (host/, the MQTT link) ---
    HOST_BUTTON = "host.button", "a button press from the firmware"
    HOST_UNROUTED = "host.unrouted", "a host event that no binding routes, and why"
    HOST_RUNNER_FAILED = "host.runner_failed", "the runner of a host event raised"
    REMOTE_EXECUTED = "remote.executed", "a remote command from the firmware ran: its event and result"
    REMOTE_REFUSED = "remote.refused", "a remote command refused (unknown name, bad arguments...)"
    MQTT_NOT_CONNECTED_YET = "mqtt.not_connected_yet", "the MQTT link was not up at start-up; it keeps retrying"

    # --- the debug console (web/) ---
    CONSOLE_STARTED = "console.started", "the debug console is serving: its URL and whether a token is needed"
    CONSOLE_REFUSED = "console.refused", "a console request refused (bad token, foreign origin...)"
    CONSOLE_REFUSED_SUMMARY = ("console.refused_summary", "refusals past the first few of a window, counted per peer: "
                               "how many and for which reasons")
    CONSOLE_CONTROL = "console.control", "a control action from the console page and its outcome"
    CONSOLE_COMMAND = ("console.command", "a console control that ran as a host command: its envelope, actor, "
                       "binding and status")
    CONSOLE_COMMAND_REFUSED = ("console.command_refused", "a console control its binding does not grant: envelope, "
                               "actor and binding")
