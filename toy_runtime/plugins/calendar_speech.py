"""What `calendar.schedule.create` says: the deterministic confirmation and the short corrective lines (en/zh)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Mapping

from ..language import has_cjk
from ..pronouns import second_person
from .timeparse import WEEKDAY_CODES

_EN_WEEKDAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_EN_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
              "November", "December")
_ZH_WEEKDAY_NAMES = ("周一", "周二", "周三", "周四", "周五", "周六", "周日")


def _clock_en(when: datetime) -> str:
    hour = when.hour % 12 or 12
    return f"{hour}:{when.minute:02d} {'AM' if when.hour < 12 else 'PM'}"


def _clock_zh(when: datetime) -> str:
    h = when.hour
    part = "凌晨" if h < 6 else "上午" if h < 12 else "中午" if h == 12 else "下午" if h < 18 else "晚上"
    return f"{part}{h % 12 or 12}:{when.minute:02d}"


def _date_en(when: datetime) -> str:
    return f"{_EN_WEEKDAY_NAMES[when.weekday()]}, {_EN_MONTHS[when.month - 1]} {when.day}"


def _join_en(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def confirmation(arguments: Mapping[str, Any], result: Mapping[str, Any]) -> str:
    """The deterministic spoken confirmation with the normalized date, time and title.

    English: "OK, I'll remind you to brush your teeth on Tuesday, December 1 at 7:00 AM." (the child's "my teeth"
    said back in the second person); Chinese (a Chinese title): "好的，12月1日 上午7:00 提醒你：刷牙。"
    """
    title = second_person(str(arguments.get("title") or result.get("title") or ""))
    when = datetime.fromisoformat(str(arguments.get("start_at") or result["start_at"]))
    recurrence: Any = arguments.get("recurrence") or result.get("recurrence")
    frequency = recurrence.get("frequency") if recurrence else None
    if has_cjk(title) or result.get("locale") == "zh":
        day = f"{when.month}月{when.day}日"
        if frequency == "daily":
            return f"好的，每天 {_clock_zh(when)} 提醒你：{title}（从{day}开始）。"
        if frequency == "weekdays":
            return f"好的，每个工作日 {_clock_zh(when)} 提醒你：{title}（从{day}开始）。"
        if frequency == "weekly":
            days = "、".join(_ZH_WEEKDAY_NAMES[WEEKDAY_CODES.index(d)] for d in recurrence.get("days", []))
            return f"好的，每{days} {_clock_zh(when)} 提醒你：{title}（从{day}开始）。"
        return f"好的，{day} {_clock_zh(when)} 提醒你：{title}。"
    if frequency == "daily":
        repeat = "every day"
    elif frequency == "weekdays":
        repeat = "every weekday"
    elif frequency == "weekly":
        repeat = "every " + _join_en([_EN_WEEKDAY_NAMES[WEEKDAY_CODES.index(d)] for d in recurrence.get("days", [])])
    else:
        return f"OK, I'll remind you to {title} on {_date_en(when)} at {_clock_en(when)}."
    return f"OK, I'll remind you to {title} {repeat} at {_clock_en(when)}, starting {_date_en(when)}."


def failure_line(arguments: Mapping[str, Any], info: Mapping[str, Any]) -> str:
    """A short corrective line when the schedule was rejected or could not be stored."""
    chinese = has_cjk(str(arguments.get("title", ""))) or info.get("locale") == "zh"
    code = info.get("code")
    if code == "past_time":
        return "这个时间已经过去了，要改到什么时候？" if chinese else "That time has already passed. When should I remind you?"
    if code == "not_stored":  # the store refused the write (a full disk): said as it is, never as a success
        return "抱歉，我没能保存这个提醒。" if chinese else "Sorry, I couldn't save that reminder."
    if code == "unknown_timezone":
        return "抱歉，我不认识这个时区。" if chinese else "Sorry, I don't know that time zone."
    return "抱歉，我没能添加这个提醒。" if chinese else "Sorry, I couldn't add that reminder."
