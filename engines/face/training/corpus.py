"""English sentences to speak for the face model's synthetic training data.

Contract: `sentences(n, seed)` -> n distinct sentences, deterministic for (n, seed): the fixed
hand-written lines below first (phonetically varied: every English consonant and vowel, questions,
numbers, lists; then free-form agent talk: service, tutoring, small talk), then sentences from a
small seeded grammar over a few hundred common words.
No data set is downloaded; the text only has to make the voices produce varied phoneme
sequences, prosody and pauses.
"""

from __future__ import annotations

import random

FIXED = (
    "The quick brown fox jumps over the lazy dog.",
    "Could you please call me back before five o'clock?",
    "We were away a year ago, when the weather was warm.",
    "She sells sea shells by the sea shore.",
    "Peter Piper picked a peck of pickled peppers.",
    "How much wood would a woodchuck chuck?",
    "My mother made marmalade every Monday morning.",
    "Five very vivid violets were left in the vase.",
    "Thank you, I think that is the thing they thought of.",
    "The judge urged the jury to measure the usual pleasure.",
    "Who knew that blue shoes could move so smoothly?",
    "Oh no, the old boat is going home alone.",
    "I'd like a nice bright light for the night time.",
    "Bob bought a big bag of bread and butter.",
    "What a wonderful world it would be.",
    "Yes, we can meet at the station at seven thirty.",
    "Why are you always so sure about everything?",
    "The rain in Spain stays mainly in the plain.",
    "Please open the window, it is far too hot in here.",
    "Our new agent will answer your questions in a moment.",
    "Let me check your account balance for you.",
    "That's a great question, let me explain it step by step.",
    "Good morning! How can I help you today?",
    "Mm, I see what you mean, but are you certain?",
    "Put the cup on the table, then pour the tea.",
    "Fresh fish and chips are served on Fridays.",
    "Each child chose a cheap cherry cheesecake.",
    "Large orange cars rarely park near the harbour.",
    "The hungry hiker hurried up the hill.",
    "Ten tiny turtles tried to take the train.",
    "Zoe's zebra was lazy, so it dozed at the zoo.",
    "Angry young kings rang the long gong.",
    "Look at the book, it's a good one.",
    "Father saw the car parked on the far lawn.",
    "It is a bit early to eat cheese and beans.",
    "Around the house, the mouse found a round brown couch.",
    "The boy enjoyed the noisy toy in the oily soil.",
    "Sure, I'll share the treasure with you.",
    "One, two, three, four, five, six, seven, eight, nine, ten.",
    "The price was twenty four dollars and ninety nine cents.",
    "Remember to bring apples, bananas, pears and plums.",
    "I never said she stole my money.",
    "Thirty three thirsty thinkers thought through the theory.",
    "Whether the weather is warm or whether it is not.",
    "Mary married a merry man in May.",
    "Please hold the line while I transfer your call.",
    "The teacher asked the students to write an essay.",
    "Open wide and say ah.",
    "Excuse me, where is the nearest pharmacy?",
    "Well, that really depends on what you want to achieve.",
)

# What the agent will mostly say: service, tutoring and small talk (free-form, not templated).
CONVERSATION = (
    "Hi, thanks for calling. How can I help you today?",
    "I'm sorry to hear that. Let me look into it right away.",
    "Could you tell me the name on the account, please?",
    "Your order shipped yesterday and should arrive by Friday.",
    "I can help you reset your password in a few quick steps.",
    "Is there anything else you'd like to know?",
    "Sure, I'll send you a summary by email.",
    "That's a good point. Let's think about it together.",
    "The answer is seven, because three plus four makes seven.",
    "Photosynthesis turns sunlight, water and air into sugar.",
    "Do you want to practise a few more examples?",
    "Great job! You got every question right.",
    "Don't worry, mistakes are how we learn.",
    "Let's start with the basics and build up from there.",
    "Your appointment is booked for Tuesday at half past nine.",
    "Unfortunately, that item is out of stock at the moment.",
    "Would you prefer a window seat or an aisle seat?",
    "The weather tomorrow looks sunny with a light breeze.",
    "I didn't quite catch that. Could you say it again?",
    "Of course! Take your time, I'm not going anywhere.",
    "You can pay by card, bank transfer or cash on delivery.",
    "My name is Ava, and I'm your virtual assistant.",
    "Good evening! What would you like to talk about?",
    "I recommend saving a little every month, even a small amount.",
    "The museum opens at ten and closes at six.",
    "Maybe we could try a different approach this time.",
    "Here's a quick tip: drink water before every meal.",
    "In French, you say bonjour to greet someone politely.",
    "Remember to breathe slowly and relax your shoulders.",
    "Your balance is one thousand two hundred and five euros.",
    "Absolutely, I'd be happy to explain that again.",
    "What do you usually do on the weekend?",
    "Oh, that sounds like a wonderful trip!",
    "Please hold on while I check the delivery status.",
    "The meeting has moved to Monday morning, at eight.",
    "Mathematics is just a way of describing patterns.",
    "Try to imagine the triangle cut into two smaller pieces.",
    "Hmm, let me think about the best way to put this.",
    "Yes, you're right, I made a mistake there. Thank you.",
    "We'll refund the full amount within five working days.",
    "Who wrote the book you're reading at the moment?",
    "Why don't we review the vocabulary from last week?",
    "Our support team is available around the clock.",
    "It usually takes about twenty minutes to get there by bus.",
    "Have you ever thought about learning to play the guitar?",
    "The quickest way is to use the mobile app.",
    "Before you go, may I ask you a short question?",
    "Beautiful! Now say the whole sentence once more.",
    "Wow, you've improved a lot since our first lesson.",
    "I understand. Would you like me to cancel the booking?",
    "Please confirm your date of birth for security.",
    "A volcano is a mountain that can throw out lava and ash.",
    "The capital of Australia is Canberra, not Sydney.",
    "Each month you'll receive a statement by post.",
    "Okay, let's move on to the next topic.",
    "Pardon me, I think there's been a misunderstanding.",
    "Both options work, but the first one is cheaper.",
    "Could you spell your surname for me, please?",
    "Enjoy the rest of your day, and thanks for chatting!",
    "Let's double check the numbers before we submit the form.",
)

_SUBJECTS = (
    "the teacher", "my neighbour", "a small child", "the old doctor", "our manager", "the pilot",
    "a young woman", "the quiet man", "my brother", "the farmer", "everyone", "the baker",
    "a friendly dog", "the engineer", "her mother", "the whole team", "nobody", "the musician",
    "a tired student", "the captain", "my father", "the new nurse", "the children", "a stranger",
)
_VERBS = (
    "found", "painted", "carried", "opened", "washed", "moved", "watched", "bought", "fixed",
    "pushed", "cooked", "brought", "chose", "dropped", "measured", "loved", "threw", "borrowed",
    "showed", "cleaned", "lifted", "followed", "checked", "packed", "sold", "wrapped", "covered",
)
_OBJECTS = (
    "a heavy box", "the blue chair", "some warm bread", "the yellow boat", "a broken watch",
    "the garden gate", "an old map", "the kitchen floor", "a bag of oranges", "the window",
    "three large books", "a paper kite", "the morning news", "a cup of coffee", "the red bicycle",
    "a pair of shoes", "the video", "a jar of honey", "the wooden fence", "two fresh fish",
    "the piano", "a long letter", "the television", "some purple flowers", "the silver spoon",
)
_PLACES = (
    "in the park", "near the river", "at the station", "after lunch", "before dawn",
    "behind the house", "on Thursday", "during the storm", "at the market", "in the evening",
    "under the bridge", "by the window", "at school", "next to the church", "in the village",
    "on the beach", "through the forest", "at midnight", "around noon", "in the office",
)
_OPENERS = ("", "", "", "Yesterday, ", "Luckily, ", "Of course, ", "Meanwhile, ", "Sadly, ",
            "Well, ", "So, ", "Honestly, ", "Last week, ")
_QUESTIONS = (
    "Why did {s} {v} {o} {p}?", "Do you think {s} {v} {o}?", "Who {v} {o} {p}?",
    "Is it true that {s} {v} {o} {p}?", "Where was {o} when {s} arrived?",
)
_STATEMENTS = (
    "{op}{s} {v} {o} {p}.", "{op}{s} {v} {o}, and then {s2} {v2} {o2}.",
    "{op}{s} {v} {o} {p}, but {s2} did not notice.", "{op}{o} was {v} by {s} {p}.",
    "{op}{s} said that {s2} {v2} {o2} {p}.",
)


def _generated(rng: random.Random) -> str:
    template = rng.choice(_QUESTIONS) if rng.random() < 0.2 else rng.choice(_STATEMENTS)
    text = template.format(
        op=rng.choice(_OPENERS), s=rng.choice(_SUBJECTS), v=rng.choice(_VERBS),
        o=rng.choice(_OBJECTS), p=rng.choice(_PLACES), s2=rng.choice(_SUBJECTS),
        v2=rng.choice(_VERBS), o2=rng.choice(_OBJECTS),
    )
    return text[0].upper() + text[1:]


def sentences(n: int, seed: int = 0) -> list[str]:
    """n distinct sentences: the fixed lines, then generated ones (deterministic)."""
    out = list((FIXED + CONVERSATION)[:n])
    seen = set(out)
    rng = random.Random(seed)
    while len(out) < n:
        line = _generated(rng)
        if line not in seen:
            seen.add(line)
            out.append(line)
    return out
