"""Deterministic, realistic person names for the autocomplete scenario, and prefixes
typed against them; no downloads.

A name is a first name, sometimes a middle initial, a last name and sometimes a
second last name ("Inés M. García Ortega", "Søren Østergaard", "Zoë O'Brien"), drawn
with a seeded RNG from the lists below (European, Latin American, African, Asian and
Middle Eastern names in Latin script with their accents, plus some in Greek and
Cyrillic), until the wanted number of distinct names is reached: about 1 in 4 names
has a non-ASCII character.
"""

from __future__ import annotations

import random
import unicodedata

FIRST = """
Aaliyah Aarav Abdullah Adèle Adrián Agnieszka Ahmed Aiko Aisha Akira Alejandro Aleksander Alexandre Alice Amélie
Amir Ana Anaïs André Andrea Ángel Anja Anna Antoine António Arjun Astrid Aurélie Ayşe Beatriz Benedikt Benjamin
Björn Bogdan Brigitte Bruno Camila Carlos Carmen Catalina Cédric Chiara Chloé Chen Clément Daniel Dávid Deepika
Diego Dmitri Dolores Élodie Elena Elif Emil Emma Emre Eszter Fatima Fatoumata Felipe Filip François Frédéric
Gabriel Gérard Giulia Gonzalo Grażyna Guðrún Hana Hannah Hélène Henrik Hiroshi Hugo Ibrahim Ignacio Inês Inés
Ingrid Ioana Irène Isabel Ivan Jakub James Jan Javier Jérôme Jesús João Jonas Jordi Jörg José Juan Julia Jürgen
Kai Kamila Karim Katarzyna Kenji Khadija Kofi Lars Laura Léa Leila Léon Lucas Lucía Luis Łukasz Magnus Małgorzata
Manon María Mariana Marie Marta Martín Mateo Matías Maximilian Mehmet Mei Mia Michał Miguel Mohammed Nadia
Naoko Nicolás Niklas Noémie Nuno Océane Olga Oliver Omar Óscar Pablo Paolo Patrícia Pedro Petra Pierre Priya
Rafael Raúl Renée Ricardo Rin Rocío Rodrigo Rui Sakura Samuel Sara Sebastián Sergio Siobhán Sofía Søren Stéphane
Sven Szymon Tamás Théo Thomas Tomáš Úrsula Valentina Valérie Víctor Wei Wojciech Xavier Yasmin Yūki Yusuf Zoë
Zoltán Δημήτρης Ελένη Γιώργος Мария Алексей Ольга Дмитрий
""".split()

LAST = """
Abe Acosta Adeyemi Almeida Álvarez Andersson Antonelli Bakker Baptiste Barbosa Bauer Becker Bernard Bianchi
Blanco Bogdanović Bonnet Brown Castro Çelik Chen Christensen Cohen Costa Dąbrowski Dahl Delgado Demir Diallo
Díaz Dubois Dumont Dvořák Eriksson Esposito Fernández Ferreira Fischer Fontaine Fournier Francisco Fuchs
García Gómez González Gonçalves Greco Grünewald Guðmundsson Gutiérrez Haddad Hansen Hartmann Hernández Hoffmann
Horváth Hussain Ibáñez Ivanović Jakobsen Jansen Jiménez Johansson Jovanović Kaczmarek Kaya Kelly Kim Kovács
Kowalski Krüger Kumar Lambert Larsen Laurent Lefèvre Lehmann Lewandowski Li Lindqvist Liu López Lozano Mäkinen
Mancini Marín Martín Martínez Méndez Mercier Meyer Molina Moreau Moreno Müller Murphy Nagy Nakamura Navarro
Němec Nguyen Nielsen Novák Núñez O'Brien O'Connor Okafor Oliveira Ortega Østergaard Öztürk Papadopoulos Patel
Pereira Pérez Petrović Popescu Quintero Ramírez Ramos Richter Rodríguez Romero Rossi Rousseau Rubio Ruiz Russo
Sánchez Santos Schäfer Schmidt Schneider Schulz Silva Singh Sousa Suárez Svensson Szabó Takahashi Tanaka Torres
Tremblay Varga Vasquez Vázquez Vieira Virtanen Vogel Wagner Wang Weber Wójcik Yamamoto Yılmaz Zhang Zieliński
Παπαδόπουλος Οικονόμου Иванов Смирнова Кузнецов
""".split()

INITIALS = "ABCDEFGHIJKLMNOPRSTVWÁÉÖ"


def names(n: int, seed: int = 1) -> list[str]:
    """n distinct names, the same for the same n and seed."""
    rng = random.Random(seed)
    out: dict[str, None] = {}  # insertion-ordered set
    while len(out) < n:
        parts = [rng.choice(FIRST)]
        if rng.random() < 0.5:
            parts.append(rng.choice(INITIALS) + ".")
        parts.append(rng.choice(LAST))
        if rng.random() < 0.3:
            parts.append(rng.choice(LAST))
        out[" ".join(parts)] = None
    return list(out)


def prefixes(pool: list[str], n: int, seed: int) -> list[str]:
    """n prefixes of 1-4 characters of names drawn from pool (within the first name),
    half typed in lower case, as people type them."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        first = rng.choice(pool).split(" ", 1)[0]
        p = first[: rng.randint(1, min(4, len(first)))]
        out.append(p.lower() if rng.random() < 0.5 else p)
    return out


_LIGATURES = str.maketrans({"ø": "o", "Ø": "O", "ł": "l", "Ł": "L", "ß": "ss", "æ": "ae", "Æ": "AE", "œ": "oe",
                            "ð": "d", "Ð": "D", "þ": "th", "ı": "i"})


def ascii_fold(text: str) -> str:
    """Lower-case ASCII, as the book's index needs: accents dropped ("José" ->
    "jose"), letters without a decomposition spelled out ("Søren" -> "soren"); ""
    when a character has no ASCII spelling (Greek, Cyrillic)."""
    plain = "".join(c for c in unicodedata.normalize("NFKD", text.translate(_LIGATURES))
                    if not unicodedata.combining(c)).lower()
    return plain if plain.isascii() else ""
